#include "segments/inflight.h"

#include <immintrin.h>

#include <thread>

namespace synclog::seg::inflight {
namespace {

Slot g_slots[kMaxThreads];
std::atomic<size_t> g_high_water{0};

struct Holder {
  Slot* slot = nullptr;
  ~Holder() {
    if (slot != nullptr) slot->taken.store(false, std::memory_order_release);
  }
};

Slot* claim() {
  for (size_t i = 0; i < kMaxThreads; ++i) {
    bool expected = false;
    if (!g_slots[i].taken.load(std::memory_order_relaxed) &&
        g_slots[i].taken.compare_exchange_strong(expected, true)) {
      size_t hw = g_high_water.load();
      while (hw < i + 1 && !g_high_water.compare_exchange_weak(hw, i + 1)) {
      }
      return &g_slots[i];
    }
  }
  return nullptr;
}

}  // namespace

Slot* mine() {
  thread_local Holder holder;
  if (holder.slot == nullptr) holder.slot = claim();
  return holder.slot;
}

void drain() {
  const size_t n = g_high_water.load();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t seen = g_slots[i].seq.load();
    if ((seen & 1) == 0) continue;
    // A writer is between reserve and complete: a memcpy away, unless it was
    // preempted. Spin briefly, then yield the core to it.
    for (int spin = 0; g_slots[i].seq.load(std::memory_order_acquire) == seen; ++spin) {
      if (spin < 256) {
        _mm_pause();
      } else {
        std::this_thread::yield();
      }
    }
  }
}

}  // namespace synclog::seg::inflight
