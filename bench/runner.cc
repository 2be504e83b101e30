#include "runner.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "record.h"
#include "synclog/log.h"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count());
}

// One writer's state. Each sits on its own cache lines: the counters are
// written by the owner on every append and read by the main thread only
// while it polls, so they must not share a line with another writer's.
struct alignas(64) Writer {
  std::atomic<uint64_t> done{0};   // acknowledged appends
  std::atomic<uint64_t> bytes{0};  // their payload bytes
  std::atomic<bool> finished{false};
  std::atomic<uint64_t> last_segment{0};  // segment of its latest acknowledged record
  std::unique_ptr<Histogram> hist;
  std::vector<std::pair<uint64_t, uint64_t>> starts;
  std::optional<synclog::Error> error;
};

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

uint64_t next_random(uint64_t* state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *state = x;
}

}  // namespace

synclog::Result<Measurement> run_point(const Point& p, const synclog::Config& config) {
  const uint64_t open_start = now_ns();
  auto opened = synclog::Log::open(config);
  if (!opened) return std::unexpected(opened.error());
  synclog::Log& log = **opened;
  const double open_s = static_cast<double>(now_ns() - open_start) / 1e9;

  const uint32_t n = p.threads;
  std::vector<std::unique_ptr<Writer>> writers;
  for (uint32_t t = 0; t < n; ++t) writers.push_back(std::make_unique<Writer>());
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::atomic<bool> measuring{p.ops > 0};
  std::atomic<uint32_t> ready{0};

  auto body = [&](uint32_t t) {
    Writer& w = *writers[t];
    auto hist = std::make_unique<Histogram>();  // allocated by its owner thread
    RecordWriter records(t, p.size.max);
    const uint64_t quota = p.ops > 0 ? p.ops / n + (t < p.ops % n ? 1 : 0) : UINT64_MAX;
    const uint64_t span = p.size.max - p.size.min + 1;
    uint64_t rng = 0x9e3779b97f4a7c15ull * (t + 1);
    ready.fetch_add(1);
    go.wait(false);
    uint64_t seq = 0;
    uint64_t bytes = 0;
    uint64_t segment = UINT64_MAX;
    std::vector<std::pair<uint64_t, uint64_t>> starts;
    while (seq < quota && !stop.load(std::memory_order_relaxed)) {
      const size_t len = span == 1 ? p.size.min : p.size.min + next_random(&rng) % span;
      const auto record = records.next(seq, len);
      const bool timed = measuring.load(std::memory_order_relaxed);
      const uint64_t t0 = now_ns();
      auto r = log.append(record);
      const uint64_t t1 = now_ns();
      if (!r) {
        w.error = r.error();
        break;
      }
      if (timed) hist->record(t1 - t0);
      if (r->segment() != segment) {
        segment = r->segment();
        starts.emplace_back(segment, seq);
        w.last_segment.store(segment, std::memory_order_relaxed);
      }
      ++seq;
      bytes += len;
      w.done.store(seq, std::memory_order_relaxed);
      w.bytes.store(bytes, std::memory_order_relaxed);
    }
    w.hist = std::move(hist);
    w.starts = std::move(starts);
    w.finished.store(true, std::memory_order_release);
  };

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
  while (ready.load() < n) std::this_thread::yield();

  Snapshot begin;
  Snapshot end;
  if (p.ops > 0) {
    begin = snapshot();
    go.store(true);
    go.notify_all();
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
    go.store(true);
    go.notify_all();
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
    measuring.store(true, std::memory_order_relaxed);
    if (!m.capped) run_until(begin.ns + static_cast<uint64_t>(p.duration_s * 1e9));
    measuring.store(false, std::memory_order_relaxed);
    end = snapshot();
    stop.store(true);
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
  m.sync = end.stats.sync;
  if (m.elapsed_s > 0) {
    m.cpu_user_pct =
        (seconds(end.usage.ru_utime) - seconds(begin.usage.ru_utime)) / m.elapsed_s * 100;
    m.cpu_sys_pct =
        (seconds(end.usage.ru_stime) - seconds(begin.usage.ru_stime)) / m.elapsed_s * 100;
  }
  m.segments_released = log.stats().segments_released;
  if (!release_error.empty()) {
    ++m.errors;
    m.error = release_error;
  }
  for (const auto& w : writers) {
    m.segment_starts.push_back(w->starts);
    if (w->hist) m.latency.merge(*w->hist);
    m.appended.push_back(w->done.load());
    m.unacked_tail.push_back(w->error.has_value());
    if (w->error) {
      ++m.errors;
      if (m.error.empty()) m.error = "append: " + w->error->describe();
    }
  }

  const uint64_t close_start = now_ns();
  if (auto r = log.close(); !r) {
    ++m.errors;
    if (m.error.empty()) m.error = "close: " + r.error().describe();
  }
  m.close_s = static_cast<double>(now_ns() - close_start) / 1e9;
  return m;
}

}  // namespace bench
