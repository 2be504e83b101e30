// Completion tracking for appends, so the syncer waits only for writers that
// reserved space below its target and never for ones that start later.
//
// Each log has its own table, so a writer stalled in one log never holds up
// another log's sync. In a table each thread owns one slot (a cache line of
// its own: no sharing on the hot path). A writer makes its sequence odd
// before it reserves and even when its record is complete. The syncer
// reserves its target first and then drains: it waits for each slot that
// was odd to change. Both sides use seq_cst for "mark, then reserve" and
// "reserve, then look", so a writer whose reservation precedes the
// target's is always seen.
//
// Slots come in chunks added as threads arrive: any number of threads may
// append at once. A thread's slot goes back to its table when the thread
// exits; a table that goes first stays allocated until the last thread
// holding one of its slots has exited (or claims a slot elsewhere), so a
// thread never touches freed memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace synclog::seg::inflight {

struct alignas(64) Slot {
  std::atomic<uint64_t> seq{0};
  std::atomic<bool> taken{false};
};

inline void begin(Slot& s) { s.seq.store(s.seq.load(std::memory_order_relaxed) + 1); }
inline void end(Slot& s) {
  s.seq.store(s.seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

namespace detail {
// The table this thread last used and its slot there. Trivial, so reading
// it costs no initialization check.
struct Cache {
  uint64_t table;
  Slot* slot;
};
inline thread_local Cache t_cache{0, nullptr};
}  // namespace detail

class Table {
 public:
  Table();
  ~Table();
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;

  // This thread's slot in this table, claimed on first use.
  Slot& mine() {
    // Table ids are never reused, so a cache entry of a table that is gone
    // never matches: its slot pointer is not followed.
    if (detail::t_cache.table == id_) return *detail::t_cache.slot;
    return claim();
  }

  // Returns once every append that had begun before the call has ended.
  void drain() const;

  static constexpr size_t kChunkSlots = 64;
  struct Chunk;
  struct Slots;

 private:
  Slot& claim();

  const uint64_t id_;
  std::shared_ptr<Slots> slots_;
};

}  // namespace synclog::seg::inflight
