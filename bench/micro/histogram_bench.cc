// The cost of timing one append: a histogram record, and the clock reads
// around it.
#include <benchmark/benchmark.h>

#include <chrono>
#include <random>

#include "histogram.h"

namespace {

void BM_HistogramRecord(benchmark::State& state) {
  bench::Histogram h;
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> latency(10.0, 1.5);  // ~20 us median, long tail
  std::vector<uint64_t> values(4096);
  for (auto& v : values) v = static_cast<uint64_t>(latency(rng));
  size_t i = 0;
  for (auto _ : state) {
    h.record(values[i++ & 4095]);
  }
  benchmark::DoNotOptimize(h.count());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HistogramRecord);

void BM_ClockPairAndRecord(benchmark::State& state) {
  bench::Histogram h;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto t1 = std::chrono::steady_clock::now();
    h.record(static_cast<uint64_t>(std::chrono::nanoseconds(t1 - t0).count()));
  }
  benchmark::DoNotOptimize(h.count());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ClockPairAndRecord);

void BM_HistogramMergeAndP99(benchmark::State& state) {
  bench::Histogram a, b;
  for (uint64_t v = 1; v < 1'000'000; v += 7) b.record(v);
  for (auto _ : state) {
    a.merge(b);
    benchmark::DoNotOptimize(a.percentile(0.99));
  }
}
BENCHMARK(BM_HistogramMergeAndP99);

}  // namespace
