// Per-thread metrics, merged on read (CASSANDRA-20333): the hot path never
// touches a shared cache line. Each thread that records into a Metrics gets
// a shard of its own on first use; shards live as long as the Metrics.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "metrics/histogram.h"

namespace synclog::metrics {

enum class Hist { append, durable_wait, sync, allocation_wait, kCount };
// bytes: user payload bytes appended; stored_bytes: what they took in the
// segments as stored payloads (compressed and/or encrypted), frames' headers
// and padding not counted.
enum class Count { appends, bytes, stored_bytes, syncs, lag_blocked, kCount };

// A periodic-mode append of a small record takes about 50 ns; two clock
// reads would double that, so those appends time one call in kSampleEvery
// per thread (counters still see every call). Appends that wait for
// durability take microseconds and are all timed.
inline constexpr uint32_t kSampleEvery = 128;

struct alignas(64) Shard {
  Histogram hist[static_cast<int>(Hist::kCount)];
  std::atomic<uint64_t> count[static_cast<int>(Count::kCount)]{};

  // Whether this thread's next append is one to time: every kSampleEvery-th,
  // counted by the appends counter itself.
  bool sample() const {
    const uint64_t done = count[static_cast<int>(Count::appends)].load(std::memory_order_relaxed);
    return (done + 1) % kSampleEvery == 0;
  }

  void record(Hist h, uint64_t ns) { hist[static_cast<int>(h)].record(ns); }
  void add(Count c, uint64_t by) {
    auto& a = count[static_cast<int>(c)];
    a.store(a.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  }
};

struct Snapshot {
  HistogramData hist[static_cast<int>(Hist::kCount)];
  uint64_t count[static_cast<int>(Count::kCount)]{};
};

class Metrics {
 public:
  Metrics();
  // This thread's shard.
  Shard& local() {
    thread_local Cache cache;
    if (cache.owner == id_) return *cache.shard;
    return local_slow(cache);
  }
  Snapshot snapshot() const;

 private:
  struct Cache {
    uint64_t owner = 0;
    Shard* shard = nullptr;
  };
  Shard& local_slow(Cache& cache);

  const uint64_t id_;  // never reused, so a thread's cache cannot point at a dead Metrics
  mutable std::mutex mu_;
  std::vector<std::pair<std::thread::id, std::unique_ptr<Shard>>> shards_;
};

}  // namespace synclog::metrics
