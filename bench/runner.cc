#include "runner.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "synclog/log.h"
#include "writer.h"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count());
}

struct Snapshot {
  uint64_t ns = 0;
  rusage usage{};
  synclog::Stats stats;
  uint64_t ops = 0;
  uint64_t bytes = 0;
};

double seconds(const timeval& tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec / 1e6; }

// How often the main thread wakes while a point runs (releases, the byte
// cap, failed writers). Rarely on purpose: on a VM whose idle vCPU notices
// I/O completions only at its next timer tick, a thread waking every 2 ms
// makes fdatasync look up to twice as fast (docs/benchmarks.md).
constexpr auto kPoll = std::chrono::milliseconds(50);

// Detected rather than named so the bench builds against a synclog whose
// Stats has no such counter.
template <class S>
std::optional<uint64_t> stored_counter(const S& s) {
  if constexpr (requires { s.stored_bytes; }) {
    return static_cast<uint64_t>(s.stored_bytes);
  } else {
    return std::nullopt;
  }
}

}  // namespace

uint64_t position_distance(synclog::Position from, synclog::Position to, uint64_t segment_size) {
  constexpr uint64_t kHeader = 64;  // docs/format.md: records start at offset 64
  if (to.segment() == from.segment()) return to.offset() - from.offset();
  return (segment_size - from.offset()) +
         (to.segment() - from.segment() - 1) * (segment_size - kHeader) + (to.offset() - kHeader);
}

synclog::Result<Measurement> run_point(const Point& p, const synclog::Config& config) {
  const uint64_t open_start = now_ns();
  auto opened = synclog::Log::open(config);
  if (!opened) return std::unexpected(opened.error());
  synclog::Log& log = **opened;
  const double open_s = static_cast<double>(now_ns() - open_start) / 1e9;

  const uint32_t n = p.threads;
  std::vector<std::unique_ptr<Writer>> writers;
  for (uint32_t t = 0; t < n; ++t) writers.push_back(std::make_unique<Writer>());
  WriterControl control;
  control.measuring.store(p.ops > 0);
  auto body = [&](uint32_t t) { run_writer(log, p, t, control, *writers[t]); };

  auto snapshot = [&] {
    Snapshot s;
    s.ns = now_ns();
    ::getrusage(RUSAGE_SELF, &s.usage);
    s.stats = log.stats();
    for (const auto& w : writers) {
      s.ops += w->done.load(std::memory_order_relaxed);
      s.bytes += w->bytes.load(std::memory_order_relaxed);
    }
    return s;
  };
  auto all_finished = [&] {
    for (const auto& w : writers) {
      if (!w->finished.load(std::memory_order_acquire)) return false;
    }
    return true;
  };

  Measurement m;
  m.open_s = open_s;
  m.backend_in_use = log.backend();
  m.block_size = log.block_size();
  // Releases the segments more than `retain` behind the slowest writer.
  // A writer's records are in increasing positions, so every thread's
  // released records are a prefix of its sequence (verify.h relies on it).
  uint64_t released_below = 0;
  std::string release_error;
  auto release = [&] {
    if (p.retain == 0 || !release_error.empty()) return;
    uint64_t slowest = UINT64_MAX;
    for (const auto& w : writers) {
      slowest = std::min(slowest, w->last_segment.load(std::memory_order_relaxed));
    }
    if (slowest == 0 || slowest == UINT64_MAX || slowest <= p.retain) return;
    const uint64_t below = slowest - p.retain;
    if (below <= released_below) return;
    ++m.release_calls;
    if (auto r = log.release_before(synclog::Position(below, 0)); !r) {
      release_error = "release_before: " + r.error().describe();
    }
    released_below = below;
  };

  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < n; ++t) threads.emplace_back(body, t);
  while (control.ready.load() < n) std::this_thread::yield();

  Snapshot begin;
  Snapshot end;
  if (p.ops > 0) {
    begin = snapshot();
    control.go.store(true);
    control.go.notify_all();
    // The main thread keeps releasing (--retain) until the writers are done.
    for (auto& th : threads) {
      while (!all_finished() && p.retain > 0) {
        release();
        std::this_thread::sleep_for(kPoll);
      }
      th.join();
    }
    end = snapshot();
  } else {
    const uint64_t start = now_ns();
    control.go.store(true);
    control.go.notify_all();
    // Polls every kPoll: releases, the byte cap, writers that stopped on an error.
    auto run_until = [&](uint64_t deadline) {
      for (uint64_t now = now_ns(); now < deadline; now = now_ns()) {
        if (all_finished()) return;
        release();
        uint64_t bytes = 0;
        for (const auto& w : writers) bytes += w->bytes.load(std::memory_order_relaxed);
        if (p.max_bytes > 0 && bytes >= p.max_bytes) {
          m.capped = true;
          return;
        }
        std::this_thread::sleep_for(
            std::min<std::chrono::nanoseconds>(kPoll, std::chrono::nanoseconds(deadline - now)));
      }
    };
    run_until(start + static_cast<uint64_t>(p.warmup_s * 1e9));
    begin = snapshot();
    control.measuring.store(true, std::memory_order_relaxed);
    if (!m.capped) run_until(begin.ns + static_cast<uint64_t>(p.duration_s * 1e9));
    control.measuring.store(false, std::memory_order_relaxed);
    end = snapshot();
    control.stop.store(true);
    for (auto& th : threads) th.join();
  }

  m.elapsed_s = static_cast<double>(end.ns - begin.ns) / 1e9;
  m.ops = end.ops - begin.ops;
  m.bytes = end.bytes - begin.bytes;
  m.syncs = end.stats.syncs - begin.stats.syncs;
  m.lag_blocked = end.stats.lag_blocked_appends - begin.stats.lag_blocked_appends;
  m.max_sync_lag_us = end.stats.max_sync_lag_us;
  m.allocation_stalls = end.stats.allocation_stalls - begin.stats.allocation_stalls;
  m.segments_created = end.stats.segments_created - begin.stats.segments_created;
  m.padding_bytes = end.stats.padding_bytes - begin.stats.padding_bytes;
  m.payload_stored = end.stats.stored_bytes - begin.stats.stored_bytes;
  m.payload_appended = end.stats.bytes - begin.stats.bytes;
  m.sync = end.stats.sync;
  if (m.elapsed_s > 0) {
    m.cpu_user_pct =
        (seconds(end.usage.ru_utime) - seconds(begin.usage.ru_utime)) / m.elapsed_s * 100;
    m.cpu_sys_pct =
        (seconds(end.usage.ru_stime) - seconds(begin.usage.ru_stime)) / m.elapsed_s * 100;
  }
  if (const auto b = stored_counter(begin.stats), e = stored_counter(end.stats); b && e) {
    m.engine_stored_bytes = *e - *b;
    m.engine_appends = end.stats.appends - begin.stats.appends;
  }
  m.segments_released = log.stats().segments_released;
  if (!release_error.empty()) {
    ++m.errors;
    m.error = release_error;
  }
  const uint64_t close_start = now_ns();
  const auto closed = log.close();
  m.close_s = static_cast<double>(now_ns() - close_start) / 1e9;
  // Read after close(): by then the log has run or failed every completion,
  // so no callback touches a writer any more and a lost or repeated one shows.
  std::optional<synclog::Position> first, last;
  for (const auto& w : writers) {
    if (w->submitted == 0) continue;
    m.stored_records += w->submitted;
    if (!first || w->first_position < *first) first = w->first_position;
    if (!last || w->last_position > *last) last = w->last_position;
  }
  if (m.stored_records >= 2) {
    m.stored_bytes = position_distance(*first, *last, config.segment_size);
    // The distance spans the strides of every record but the last.
    m.stored_per_record =
        static_cast<double>(m.stored_bytes) / static_cast<double>(m.stored_records - 1);
  }
  for (const auto& w : writers) {
    m.segment_starts.push_back(w->starts);
    if (w->hist) m.latency.merge(*w->hist);
    if (w->acks.hist) m.latency.merge(*w->acks.hist);
    const uint64_t acked = w->done.load();
    m.appended.push_back(acked);
    m.unacked.push_back(std::max(w->submitted, acked) - acked + w->failed_records);
    if (auto why = writer_failure(*w); !why.empty()) {
      ++m.errors;
      if (m.error.empty()) m.error = why;
    }
  }
  if (!closed) {
    ++m.errors;
    if (m.error.empty()) m.error = "close: " + closed.error().describe();
  }
  return m;
}

}  // namespace bench
