// CRC32C throughput over record-sized buffers (every append checksums its
// payload once).
#include <benchmark/benchmark.h>

#include <vector>

#include "io/crc32c.h"

namespace {

void BM_Crc32c(benchmark::State& state) {
  std::vector<std::byte> data(static_cast<size_t>(state.range(0)));
  for (size_t i = 0; i < data.size(); ++i) data[i] = std::byte(i * 131);
  uint32_t crc = 0;
  for (auto _ : state) {
    crc = synclog::io::crc32c(crc, data);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
// 128 B: the typical small record; 192 B: the shortest input that interleaves.
BENCHMARK(BM_Crc32c)->RangeMultiplier(4)->Range(16, 1 << 20)->Arg(128)->Arg(192);

}  // namespace
