#include "metrics/histogram.h"

#include <algorithm>
#include <cmath>

namespace synclog::metrics {

static_assert(bucket_of(15) == 15 && bucket_of(16) == 16 && bucket_of(17) == 16);
static_assert(bucket_high(bucket_of(1000)) >= 1000 && bucket_high(bucket_of(1000)) < 1125);
static_assert(bucket_of(~uint64_t{0}) == kBuckets - 1);

void HistogramData::merge(const HistogramData& o) {
  for (int i = 0; i < kBuckets; ++i) counts[i] += o.counts[i];
  count += o.count;
  sum += o.sum;
  max = std::max(max, o.max);
}

uint64_t HistogramData::quantile(double q) const {
  if (count == 0) return 0;
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * count)));
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += counts[i];
    if (seen >= rank) return std::min(bucket_high(i), max);
  }
  return max;
}

uint64_t HistogramData::count_at_or_below(uint64_t v) const {
  uint64_t n = 0;
  for (int i = 0; i < kBuckets && bucket_high(i) <= v; ++i) n += counts[i];
  return n;
}

void Histogram::add_to(HistogramData& out) const {
  HistogramData d;
  for (int i = 0; i < kBuckets; ++i) d.counts[i] = counts_[i].load(std::memory_order_relaxed);
  d.count = count_.load(std::memory_order_relaxed);
  d.sum = sum_.load(std::memory_order_relaxed);
  d.max = max_.load(std::memory_order_relaxed);
  out.merge(d);
}

}  // namespace synclog::metrics
