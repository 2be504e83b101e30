// Log::append through the public API on /dev/shm.
//
// - Periodic mode: append returns without waiting, so this is reserve (one
//   fetch-add) + frame + CRC + copy into the mapped segment, plus the
//   writer-completion bookkeeping.
// - Batch mode, one thread: append returns once the record is durable. A
//   lone writer leads the sync itself (leader/follower group commit), so
//   this is a whole durable append with no thread hand-off: frame, marker,
//   msync of the dirty page (cheap on tmpfs), publish. With more writers
//   the followers' wake-up adds to it: see synclog-bench's ram rows.
//
// Segments are released and recycled as the log fills so the run stays in
// a few MiB of /dev/shm.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "record.h"
#include "scratch_dir.h"
#include "synclog/log.h"

namespace {

// state.range(0): record bytes; state.range(1), when given: metrics on (1) or off (0).
void run_appends(benchmark::State& state, const char* mode) {
  bench::ScratchDir dir("synclog-micro");
  const bool metrics = state.range(1) != 0;
  // msync: what the header above measures, whatever the default backend.
  auto config =
      synclog::Config::parse(std::string("backend=msync,mode=") + mode +
                             ",segment_size=8MiB,metrics=" + (metrics ? "true" : "false"));
  if (!config) {
    state.SkipWithError(config.error().describe().c_str());
    return;
  }
  config->dir = dir.path();
  auto log = synclog::Log::open(*config);
  if (!log) {
    state.SkipWithError(log.error().describe().c_str());
    return;
  }
  const size_t size = static_cast<size_t>(state.range(0));
  bench::RecordWriter writer(0, size);
  // Release about every 4 MiB so the log recycles two or three segments.
  const uint64_t release_every = std::max<uint64_t>(1, (4u << 20) / size);
  uint64_t seq = 0;
  synclog::Position last;
  for (auto _ : state) {
    auto pos = (*log)->append(writer.next(seq++, size));
    if (!pos) {
      state.SkipWithError(pos.error().describe().c_str());
      break;
    }
    last = *pos;
    if (seq % release_every == 0) {
      state.PauseTiming();
      if (auto s = (*log)->sync(); !s) state.SkipWithError(s.error().describe().c_str());
      if (auto r = (*log)->release_before(last); !r)
        state.SkipWithError(r.error().describe().c_str());
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
  if (auto r = (*log)->close(); !r) state.SkipWithError(r.error().describe().c_str());
}

void BM_AppendPeriodicShm(benchmark::State& state) { run_appends(state, "periodic"); }
// Metrics on versus off: the recording overhead on the fastest path.
BENCHMARK(BM_AppendPeriodicShm)
    ->ArgNames({"bytes", "metrics"})
    ->Args({128, 1})
    ->Args({128, 0})
    ->Args({4096, 1})
    ->Args({4096, 0});

void BM_AppendBatchShmOneThread(benchmark::State& state) { run_appends(state, "batch"); }
BENCHMARK(BM_AppendBatchShmOneThread)
    ->ArgNames({"bytes", "metrics"})
    ->Args({128, 1})
    ->UseRealTime();

}  // namespace
