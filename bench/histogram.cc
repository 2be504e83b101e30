#include "histogram.h"

#include <algorithm>
#include <cmath>

namespace bench {

void Histogram::merge(const Histogram& other) {
  for (size_t i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  max_ = std::max(max_, other.max_);
  min_ = std::min(min_, other.min_);
}

void Histogram::clear() { *this = Histogram(); }

uint64_t Histogram::upper_edge(size_t index) {
  if (index < kSub) return index;
  const uint64_t shift = index / kSub - 1;
  const uint64_t low = (kSub + index % kSub) << shift;
  return low + (uint64_t{1} << shift) - 1;
}

uint64_t Histogram::percentile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * count_)));
  uint64_t seen = 0;
  for (size_t i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::clamp(upper_edge(i), min(), max());
  }
  return max();
}

}  // namespace bench
