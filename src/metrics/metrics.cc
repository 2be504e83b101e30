#include "metrics/metrics.h"

namespace synclog::metrics {
namespace {
std::atomic<uint64_t> g_next_id{1};
}

Metrics::Metrics() : id_(g_next_id.fetch_add(1)) {}

Shard& Metrics::local_slow(Cache& cache) {
  std::lock_guard lock(mu_);
  const auto me = std::this_thread::get_id();
  Shard* shard = nullptr;
  for (auto& [id, s] : shards_) {
    if (id == me) shard = s.get();
  }
  if (shard == nullptr) {
    shards_.emplace_back(me, std::make_unique<Shard>());
    shard = shards_.back().second.get();
  }
  cache.owner = id_;
  cache.shard = shard;
  return *shard;
}

Snapshot Metrics::snapshot() const {
  Snapshot out;
  std::lock_guard lock(mu_);
  for (const auto& [id, s] : shards_) {
    for (int h = 0; h < static_cast<int>(Hist::kCount); ++h) s->hist[h].add_to(out.hist[h]);
    for (int c = 0; c < static_cast<int>(Count::kCount); ++c) {
      out.count[c] += s->count[c].load(std::memory_order_relaxed);
    }
  }
  return out;
}

}  // namespace synclog::metrics
