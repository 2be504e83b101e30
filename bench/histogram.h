// A log-linear latency histogram in the spirit of HdrHistogram: values (ns)
// below 2^kSubBits are counted exactly, larger ones in 2^kSubBits buckets per
// power of two, so any reported value is within 1/2^kSubBits (0.8%) of the
// truth. record() is a count-leading-zeros, two shifts and an increment.
//
// Not thread-safe: each writer thread owns one histogram (allocate it from
// that thread, so its buckets sit in that thread's memory) and the owner
// merges them after the threads have joined.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace bench {

class Histogram {
 public:
  static constexpr unsigned kSubBits = 7;   // 128 buckets per power of two
  static constexpr unsigned kMaxBits = 40;  // values clamp at 2^40 ns (18 min)
  static constexpr uint64_t kSub = uint64_t{1} << kSubBits;
  static constexpr size_t kBuckets = (kMaxBits - kSubBits + 1) * kSub;

  Histogram() : counts_(kBuckets, 0) {}

  void record(uint64_t ns) { record(ns, 1); }
  // `n` values of `ns` each: the records of one write batch.
  void record(uint64_t ns, uint64_t n) {
    if (ns >= (uint64_t{1} << kMaxBits)) ns = (uint64_t{1} << kMaxBits) - 1;
    counts_[index_of(ns)] += n;
    count_ += n;
    sum_ += ns * n;
    if (ns > max_) max_ = ns;
    if (ns < min_) min_ = ns;
  }

  void merge(const Histogram& other);
  void clear();

  uint64_t count() const { return count_; }
  uint64_t max() const { return count_ ? max_ : 0; }
  uint64_t min() const { return count_ ? min_ : 0; }
  double mean() const { return count_ ? static_cast<double>(sum_) / count_ : 0.0; }
  // The smallest recorded value v such that at least q (0..1] of the values
  // are <= v, reported as the upper edge of its bucket (clamped to max()).
  uint64_t percentile(double q) const;

  static size_t index_of(uint64_t v) {
    if (v < kSub) return static_cast<size_t>(v);
    const unsigned shift = static_cast<unsigned>(std::bit_width(v)) - 1 - kSubBits;
    return static_cast<size_t>((shift + 1) * kSub + ((v >> shift) - kSub));
  }
  // Largest value that lands in bucket `index`.
  static uint64_t upper_edge(size_t index);

 private:
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
  uint64_t max_ = 0;
  uint64_t min_ = UINT64_MAX;
};

}  // namespace bench
