// Runs one point: opens the log, starts T writer threads (writer.h) that
// append bench records (record.h) for the warmup and then the measured
// window (or a fixed op count), and collects what happened. With point.retain > 0 the
// polling main thread releases segments that lie more than `retain` segments
// behind the slowest writer, so long points run in bounded space. Each writer times every
// append into its own Histogram; in batch and group mode append() returns
// once the record is durable, so that is the acknowledge latency, in
// periodic mode it is the cost of append() alone. With --inflight it is
// always from the append_async() call to its completion.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "histogram.h"
#include "point.h"
#include "synclog/error.h"
#include "synclog/stats.h"

namespace bench {

struct Measurement {
  double elapsed_s = 0;  // the measured window
  uint64_t ops = 0;      // records acknowledged inside the window
  uint64_t bytes = 0;    // their payload bytes
  Histogram latency;     // ns, appends that began inside the window
  uint64_t syncs = 0;    // Stats deltas over the window
  uint64_t lag_blocked = 0;
  uint64_t max_sync_lag_us = 0;
  uint64_t allocation_stalls = 0;
  uint64_t segments_created = 0;
  uint64_t padding_bytes = 0;  // direct I/O tail padding (Stats::padding_bytes)
  // Payload bytes as stored (Stats::stored_bytes: compressed and/or
  // encrypted) and as appended (Stats::bytes), over the window.
  uint64_t payload_stored = 0, payload_appended = 0;
  synclog::Latency sync;    // the log's own persist latency, whole run (not windowed)
  double cpu_user_pct = 0;  // of one core, the whole process (writers + log threads)
  double cpu_sys_pct = 0;
  uint64_t errors = 0;         // failed appends and a failed close
  std::string error;           // the first one
  bool capped = false;         // ended early at max_bytes
  std::string backend_in_use;  // Log::backend(): for backend=auto, what it chose and why
  uint32_t block_size = 0;     // Log::block_size(): direct I/O alignment, 0 for mmap
  double open_s = 0;           // Log::open before the run
  double close_s = 0;          // Log::close after it

  // Segment space the run's records took (docs/benchmarks.md, "Stored bytes
  // per record"): the byte distance from the first record's position to the
  // last one's, across segments, over the records between. 0 with fewer
  // than two records.
  uint64_t stored_bytes = 0;
  uint64_t stored_records = 0;
  double stored_per_record = 0;
  // The engine's own count of bytes stored, over the window, where this
  // synclog build's Stats has one (stored_bytes); else nullopt.
  std::optional<uint64_t> engine_stored_bytes;
  uint64_t engine_appends = 0;  // Stats::appends over the same window

  uint64_t segments_released = 0;  // over the whole run (--retain)
  uint64_t release_calls = 0;

  // For verification, per writer thread over the whole run (warmup too):
  std::vector<uint64_t> appended;  // acknowledged records (seq 0..n-1)
  // Records whose fate is unknown (a failed call, failed completions): they
  // may or may not be there, right after the acknowledged ones.
  std::vector<uint64_t> unacked;
  // (segment id, first seq the thread appended into it), in order: tells
  // which seqs lie in released segments.
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> segment_starts;
};

// Opens a log with `config` (config.dir must exist and be empty) and runs
// the point. Fails only if Log::open fails; errors after that are counted in
// the Measurement.
// Bytes of segment space from record position `from` to `to` (from <= to),
// in a log of `segment_size` segments: each segment switched out of counts
// to its end (its end record and unused tail included) and each one
// entered from offset 64 (the header is not counted).
uint64_t position_distance(synclog::Position from, synclog::Position to, uint64_t segment_size);

[[nodiscard]] synclog::Result<Measurement> run_point(const Point& point,
                                                     const synclog::Config& config);

}  // namespace bench
