#include "sync/msync_pool_backend.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "io/mapping.h"

namespace synclog::sync {
namespace {

// A parked thread takes 1-50 us to wake; spin this many pause instructions
// (a few us) before sleeping, as the driver does (driver.cc).
constexpr int kSpinBeforePark = 2000;
constexpr size_t kCacheLine = 64;

// A point in the concatenation of one persist's ranges: byte `offset` of
// ranges[index]. {ranges.size(), 0} is the end.
struct Cursor {
  size_t index = 0;
  uint64_t offset = 0;
  bool operator==(const Cursor&) const = default;
};

// Bytes [begin, end) of that concatenation. Every cut inside a range is on a
// page boundary of its segment, so neighbouring slices never share a page.
struct Slice {
  std::span<const Range> ranges;
  Cursor begin;
  Cursor end;
};

bool empty_range(const Range& r) { return r.to <= r.from; }

Result<void> sync_slice(const Slice& s) {
  for (size_t i = s.begin.index; i < s.ranges.size() && i <= s.end.index; ++i) {
    const Range& r = s.ranges[i];
    if (empty_range(r)) continue;
    const uint64_t lo = i == s.begin.index ? s.begin.offset : r.from;
    const uint64_t hi = i == s.end.index ? s.end.offset : r.to;
    if (hi <= lo) continue;
    if (auto st = r.segment->mapping().sync_range(lo, hi); !st) {
      return make_error(st.error().code,
                        "msync of segment " + r.segment->path().string() + " bytes [" +
                            std::to_string(lo) + ", " + std::to_string(hi) +
                            ") failed: " + st.error().message,
                        st.error().sys_errno);
    }
  }
  return {};
}

class MsyncPoolBackend final : public Backend {
 public:
  MsyncPoolBackend(uint32_t threads, uint64_t min_slice)
      : threads_(threads),
        min_slice_(min_slice),
        workers_(std::make_unique<Worker[]>(threads)),
        slices_(threads + size_t{1}) {}
  ~MsyncPoolBackend() override;

  // Starts the workers; on failure the destructor joins those that started.
  [[nodiscard]] Result<void> start();

  const char* name() const override { return "msync-pool"; }
  [[nodiscard]] Result<void> persist(std::span<const Range> ranges) override;

 private:
  // One per worker, written by the caller only while the worker is idle
  // (before a post) and by the worker only while it owns a slice (before
  // its completion). `posted` is the futex word the worker waits on.
  struct alignas(kCacheLine) Worker {
    std::atomic<uint32_t> posted{0};  // bumped once per slice handed over
    std::atomic<bool> parked{false};  // the worker is (about to be) asleep
    bool stop = false;
    Slice slice;
    std::optional<Error> error;  // set by the worker if its slice failed
    std::thread thread;
  };

  // Fills slices_ for `ranges`; returns how many are non-empty.
  size_t plan(std::span<const Range> ranges);
  void post(Worker& w);
  void run(Worker& w);
  static uint32_t await_post(Worker& w, uint32_t seen);
  void complete_one();
  void await_completions();

  const uint32_t threads_;
  const uint64_t min_slice_;
  std::unique_ptr<Worker[]> workers_;
  std::vector<Slice> slices_;  // threads_ + 1, reused by every persist
  // Slices handed to workers in this persist and not yet finished.
  alignas(kCacheLine) std::atomic<uint32_t> pending_{0};
  std::atomic<bool> caller_parked_{false};
};

MsyncPoolBackend::~MsyncPoolBackend() {
  for (uint32_t i = 0; i < threads_; ++i) {
    Worker& w = workers_[i];
    if (!w.thread.joinable()) continue;
    w.stop = true;
    post(w);
    w.thread.join();
  }
}

Result<void> MsyncPoolBackend::start() {
  for (uint32_t i = 0; i < threads_; ++i) {
    Worker* w = &workers_[i];
    try {
      w->thread = std::thread([this, w] { run(*w); });
    } catch (const std::system_error& e) {
      return make_error(Errc::unsupported,
                        "msync-pool: cannot start sync thread " + std::to_string(i + 1) + " of " +
                            std::to_string(threads_) + ": " + e.what(),
                        e.code().value());
    }
  }
  return {};
}

size_t MsyncPoolBackend::plan(std::span<const Range> ranges) {
  const uint64_t page = io::page_size();
  const size_t n = ranges.size();
  const Cursor end{n, 0};
  auto first_page = [&](size_t i) { return ranges[i].from & ~(page - 1); };
  auto start_of = [&](size_t i) { return i < n ? Cursor{i, first_page(i)} : end; };

  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!empty_range(ranges[i])) total += ranges[i].to - first_page(i);
  }
  if (total == 0) return 0;
  const uint64_t k = std::clamp<uint64_t>(total / min_slice_, 1, uint64_t{threads_} + 1);
  if (k == 1) {
    slices_[0] = Slice{ranges, start_of(0), end};
    return 1;
  }
  const uint64_t share = ((total + k - 1) / k + page - 1) & ~(page - 1);

  // The cursor `share` bytes past `pos`, moved up to a page boundary.
  auto advance = [&](Cursor pos) {
    uint64_t need = share;
    while (pos.index < n) {
      const Range& r = ranges[pos.index];
      const uint64_t left = !empty_range(r) && r.to > pos.offset ? r.to - pos.offset : 0;
      if (left > need) {
        const uint64_t cut = (pos.offset + need + page - 1) & ~(page - 1);
        return cut < r.to ? Cursor{pos.index, cut} : start_of(pos.index + 1);
      }
      need -= left;
      pos = start_of(pos.index + 1);
      if (need == 0) break;
    }
    return pos;
  };

  size_t count = 0;
  Cursor pos = start_of(0);
  for (uint64_t j = 0; j < k && pos != end; ++j) {
    const Cursor next = j + 1 == k ? end : advance(pos);
    slices_[count++] = Slice{ranges, pos, next};
    pos = next;
  }
  return count;
}

// Caller side of the hand-off. The seq_cst store to `posted` and load of
// `parked` pair with the worker's store to `parked` and load of `posted`
// (await_post): either the worker sees the post or we see it parked.
void MsyncPoolBackend::post(Worker& w) {
  w.posted.fetch_add(1);
  if (w.parked.load()) w.posted.notify_one();
}

uint32_t MsyncPoolBackend::await_post(Worker& w, uint32_t seen) {
  for (int i = 0; i < kSpinBeforePark; ++i) {
    const uint32_t v = w.posted.load(std::memory_order_acquire);
    if (v != seen) return v;
    _mm_pause();
  }
  for (;;) {
    w.parked.store(true);
    const uint32_t v = w.posted.load();
    if (v != seen) {
      w.parked.store(false, std::memory_order_relaxed);
      return v;
    }
    w.posted.wait(seen, std::memory_order_acquire);
  }
}

void MsyncPoolBackend::run(Worker& w) {
  uint32_t seen = 0;
  for (;;) {
    seen = await_post(w, seen);
    if (w.stop) return;
    if (auto r = sync_slice(w.slice); !r) w.error = std::move(r.error());
    complete_one();
  }
}

// Worker side of the completion count; the same Dekker pairing as post(),
// with caller_parked_ in the role of `parked`.
void MsyncPoolBackend::complete_one() {
  if (pending_.fetch_sub(1) == 1 && caller_parked_.load()) pending_.notify_one();
}

void MsyncPoolBackend::await_completions() {
  for (int i = 0; i < kSpinBeforePark; ++i) {
    if (pending_.load(std::memory_order_acquire) == 0) return;
    _mm_pause();
  }
  for (;;) {
    caller_parked_.store(true);
    const uint32_t v = pending_.load();
    if (v == 0) break;
    pending_.wait(v, std::memory_order_acquire);
  }
  caller_parked_.store(false, std::memory_order_relaxed);
}

Result<void> MsyncPoolBackend::persist(std::span<const Range> ranges) {
  const size_t k = plan(ranges);
  if (k == 0) return {};
  if (k == 1) return sync_slice(slices_[0]);

  pending_.store(static_cast<uint32_t>(k - 1), std::memory_order_relaxed);
  for (size_t j = 1; j < k; ++j) {
    Worker& w = workers_[j - 1];
    w.slice = slices_[j];
    post(w);  // releases the slice and the pending_ count to the worker
  }
  auto own = sync_slice(slices_[0]);
  await_completions();  // acquires every worker's result

  std::optional<Error> first;
  if (!own) first = std::move(own.error());
  for (size_t j = 1; j < k; ++j) {
    Worker& w = workers_[j - 1];
    if (w.error && !first) first = std::move(*w.error);
    w.error.reset();
  }
  if (first) return std::unexpected(std::move(*first));
  return {};
}

}  // namespace

Result<std::unique_ptr<Backend>> make_msync_pool_backend(uint32_t threads,
                                                         uint64_t min_slice_bytes) {
  if (threads == 0) {
    return make_error(Errc::invalid_argument,
                      "msync-pool needs at least 1 sync thread (got 0); use msync for none");
  }
  if (min_slice_bytes == 0) {
    return make_error(Errc::invalid_argument, "msync-pool: the minimum slice size must be > 0");
  }
  auto pool = std::make_unique<MsyncPoolBackend>(threads, min_slice_bytes);
  if (auto r = pool->start(); !r) return std::unexpected(r.error());
  return std::unique_ptr<Backend>(std::move(pool));
}

}  // namespace synclog::sync
