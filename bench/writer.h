// One writer thread of a point (runner.h): appends bench records (record.h)
// with append() or, with point.inflight > 0, keeps that many append_async()
// calls outstanding, like fio's iodepth; with point.batch > 1 each call
// carries that many records (append_batch / append_batch_async). Every
// count and the latency histogram are in records, so a batch of K counts K
// acknowledged records, each with the batch's latency.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "histogram.h"
#include "point.h"
#include "synclog/error.h"
#include "synclog/log.h"

namespace bench {

// The run-wide flags every writer watches.
struct WriterControl {
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::atomic<bool> measuring{false};
  std::atomic<uint32_t> ready{0};
};

// A writer's state. Each sits on its own cache lines: the counters are
// written on every acknowledgement and read by the main thread only while
// it polls, so they must not share a line with another writer's.
struct alignas(64) Writer {
  std::atomic<uint64_t> done{0};   // acknowledged records (a prefix of seq 0, 1, ...)
  std::atomic<uint64_t> bytes{0};  // their payload bytes
  std::atomic<bool> finished{false};
  std::atomic<uint64_t> last_segment{0};  // segment of its latest acknowledged record

  // Set by the writer thread before `finished`.
  std::unique_ptr<Histogram> hist;  // blocking appends
  std::vector<std::pair<uint64_t, uint64_t>> starts;
  std::optional<synclog::Error> error;  // a failed append call
  uint64_t submitted = 0;               // records of calls that returned a position
  uint64_t failed_records = 0;          // records of the call that failed: there or not
  uint64_t calls = 0;                   // async calls that returned a position
  // Where its first and last record (of calls that returned a position)
  // start; both 0 if it appended none. For stored bytes per record.
  synclog::Position first_position, last_position;
  std::string drain_error;  // completions still missing at the end

  // Written only by the log's completion thread (one callback at a time)
  // and published by `completed` (release), so they need no lock.
  struct alignas(64) Acks {
    std::atomic<uint64_t> completed{0};  // completions fired
    uint64_t next_call = 0;              // the call whose completion is due
    std::unique_ptr<Histogram> hist;     // ack latency: append call to completion
    std::optional<synclog::Error> error;
    std::string misorder;  // a completion lost, repeated or out of call order
  } acks;
};

// The writer thread's body: waits for control.go, appends until its quota
// or control.stop, then (async) waits for every completion of its calls.
void run_writer(synclog::Log& log, const Point& point, uint32_t thread, WriterControl& control,
                Writer& w);

// After close(): the first thing that went wrong with this writer's
// appends or completions, or "".
std::string writer_failure(const Writer& w);

}  // namespace bench
