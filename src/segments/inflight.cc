#include "segments/inflight.h"

#include <immintrin.h>

#include <thread>
#include <vector>

namespace synclog::seg::inflight {

struct Table::Chunk {
  Slot slot[kChunkSlots];
  std::atomic<Chunk*> next{nullptr};
};

struct Table::Slots {
  Chunk first;
  std::atomic<size_t> high_water{0};  // slots ever claimed: drain looks at these
  std::atomic<bool> alive{true};      // the table still exists
  ~Slots() {
    for (Chunk* c = first.next.load(); c != nullptr;) {
      Chunk* next = c->next.load();
      delete c;
      c = next;
    }
  }
};

namespace {

std::atomic<uint64_t> g_next_table{1};

// What a thread holds: one slot per table it appended to, released when the
// thread exits. The shared_ptr keeps a closed table's slots allocated until
// then.
struct Held {
  uint64_t table;
  std::shared_ptr<Table::Slots> slots;
  Slot* slot;
};
struct Holder {
  std::vector<Held> held;
  ~Holder() {
    for (Held& h : held) h.slot->taken.store(false, std::memory_order_release);
  }
};

}  // namespace

Table::Table() : id_(g_next_table.fetch_add(1)), slots_(std::make_shared<Slots>()) {}

Table::~Table() { slots_->alive.store(false, std::memory_order_release); }

Slot& Table::claim() {
  thread_local Holder holder;
  // Slots of tables that are gone are of no use to anyone: let them go.
  std::erase_if(holder.held,
                [](const Held& h) { return !h.slots->alive.load(std::memory_order_acquire); });
  for (const Held& h : holder.held) {
    if (h.table == id_) {
      detail::t_cache = detail::Cache{id_, h.slot};
      return *h.slot;
    }
  }
  Chunk* chunk = &slots_->first;
  for (size_t base = 0;; base += kChunkSlots) {
    for (size_t i = 0; i < kChunkSlots; ++i) {
      Slot& s = chunk->slot[i];
      bool expected = false;
      if (s.taken.load(std::memory_order_relaxed) ||
          !s.taken.compare_exchange_strong(expected, true))
        continue;
      size_t hw = slots_->high_water.load();
      while (hw < base + i + 1 && !slots_->high_water.compare_exchange_weak(hw, base + i + 1)) {
      }
      holder.held.push_back(Held{id_, slots_, &s});
      detail::t_cache = detail::Cache{id_, &s};
      return s;
    }
    Chunk* next = chunk->next.load(std::memory_order_acquire);
    if (next == nullptr) {
      // Every slot is held: add a chunk (or take the one another thread added).
      auto* fresh = new Chunk;
      if (chunk->next.compare_exchange_strong(next, fresh)) {
        next = fresh;
      } else {
        delete fresh;
      }
    }
    chunk = next;
  }
}

void Table::drain() const {
  const size_t n = slots_->high_water.load();
  const Chunk* chunk = &slots_->first;
  for (size_t base = 0; base < n; base += kChunkSlots) {
    for (size_t i = 0; i < kChunkSlots && base + i < n; ++i) {
      const Slot& s = chunk->slot[i];
      const uint64_t seen = s.seq.load();
      if ((seen & 1) == 0) continue;
      // A writer is between reserve and complete: a memcpy away, unless it
      // was preempted. Spin briefly, then yield the core to it.
      for (int spin = 0; s.seq.load(std::memory_order_acquire) == seen; ++spin) {
        if (spin < 256) {
          _mm_pause();
        } else {
          std::this_thread::yield();
        }
      }
    }
    chunk = chunk->next.load(std::memory_order_acquire);
  }
}

}  // namespace synclog::seg::inflight
