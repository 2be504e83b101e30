// A log-linear latency histogram (HdrHistogram-like): 8 sub-buckets per
// power of two, so any value is placed within 12.5%. One per thread: a
// record is a few relaxed loads and stores on memory no other thread writes.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>

namespace synclog::metrics {

inline constexpr int kSubBits = 3;
inline constexpr int kBuckets = 16 + (64 - 4) * (1 << kSubBits);

constexpr int bucket_of(uint64_t v) {
  if (v < 16) return static_cast<int>(v);
  const int e = 63 - std::countl_zero(v);
  const int sub = static_cast<int>((v >> (e - kSubBits)) & ((1 << kSubBits) - 1));
  return 16 + (e - 4) * (1 << kSubBits) + sub;
}

// The largest value that lands in bucket b.
constexpr uint64_t bucket_high(int b) {
  if (b < 16) return static_cast<uint64_t>(b);
  const int e = (b - 16) / (1 << kSubBits) + 4;
  const uint64_t sub = static_cast<uint64_t>((b - 16) % (1 << kSubBits));
  const uint64_t low = (uint64_t{1} << e) | (sub << (e - kSubBits));
  return low + (uint64_t{1} << (e - kSubBits)) - 1;
}

struct HistogramData {
  std::array<uint64_t, kBuckets> counts{};
  uint64_t count = 0;
  uint64_t sum = 0;
  uint64_t max = 0;

  void merge(const HistogramData& o);
  // The value at quantile q (0..1): the top of the bucket that holds it.
  uint64_t quantile(double q) const;
  // Samples in buckets whose top is at or below v: a lower bound on the
  // samples <= v, short by at most those in the bucket that holds v.
  uint64_t count_at_or_below(uint64_t v) const;
};

class Histogram {
 public:
  void record(uint64_t v) {
    bump(counts_[bucket_of(v)], 1);
    bump(count_, 1);
    bump(sum_, v);
    if (v > max_.load(std::memory_order_relaxed)) max_.store(v, std::memory_order_relaxed);
  }
  void add_to(HistogramData& out) const;

 private:
  // Only the owning thread writes: load + store, no locked instruction.
  static void bump(std::atomic<uint64_t>& a, uint64_t by) {
    a.store(a.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  }
  std::array<std::atomic<uint64_t>, kBuckets> counts_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_{0};
  std::atomic<uint64_t> max_{0};
};

}  // namespace synclog::metrics
