// Completion tracking for appends, so the syncer waits only for writers that
// reserved space below its target and never for ones that start later.
//
// Each thread owns one slot (a cache line of its own: no sharing on the hot
// path). A writer makes its sequence odd before it reserves and even when
// its record is complete. The syncer reserves its target first and then
// drains: it waits for each slot that was odd to change. Both sides use
// seq_cst for "mark, then reserve" and "reserve, then look", so a writer
// whose reservation precedes the target's is always seen.
#pragma once

#include <atomic>
#include <cstdint>

namespace synclog::seg::inflight {

struct alignas(64) Slot {
  std::atomic<uint64_t> seq{0};
  std::atomic<bool> taken{false};
};

inline constexpr size_t kMaxThreads = 4096;

// This thread's slot, claimed on first use and freed when the thread exits;
// nullptr if kMaxThreads threads already hold one.
Slot* mine();

inline void begin(Slot& s) { s.seq.store(s.seq.load(std::memory_order_relaxed) + 1); }
inline void end(Slot& s) {
  s.seq.store(s.seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

// Returns once every append that had begun before the call has ended.
void drain();

}  // namespace synclog::seg::inflight
