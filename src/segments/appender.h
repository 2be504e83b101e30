// Appender: the write path's first half. Reserves space in the active
// segment with one fetch_add, frames and checksums the record straight into
// the segment image, and marks it complete (inflight.h). On overflow the one
// writer that crossed the end writes the end record and switches to the next
// spare segment; the others wait for that switch.
//
// Thread-safe. The SegmentManager must outlive it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <vector>

#include "metrics/metrics.h"
#include "segments/format.h"
#include "segments/inflight.h"
#include "segments/manager.h"
#include "segments/transform.h"
#include "synclog/error.h"
#include "synclog/position.h"

namespace synclog::seg {

// How user records (data, batch, fragments) are stored: compressed (whole
// records and batches only) and/or encrypted with the segment's cipher
// (docs/format.md, Transformed records).
struct RecordTransform {
  Compression compression = Compression::none;
  int level = 0;
  bool encrypt = false;
};

class Appender {
 public:
  // Data records above `max_whole` bytes are written as fragments
  // (fragments.h).
  Appender(SegmentManager& manager, std::chrono::milliseconds allocation_timeout,
           metrics::Metrics& metrics, uint64_t max_whole, RecordTransform transform = {});

  // Begins the session. Its first segment is taken, and the session record
  // naming where the previous session's log ended written into it, by the
  // first append: opening a log (and closing it unused) never needs more
  // space than the log already holds.
  void start(Position previous_end);
  // Whether the session has taken a segment (an append happened).
  bool started() const { return first_segment() != kNoSegment; }

  // Appends one record; returns where it starts.
  [[nodiscard]] Result<Position> append(Kind kind, std::span<const std::byte> payload);
  // Called with the record's position inside the writer's inflight window:
  // a sync that covers the record cannot finish before the call returns.
  // `at` is the record's position, `settled` the one it is durable past
  // (its own, or its last fragment's).
  struct Placed {
    void (*fn)(void* context, Position at, Position settled);
    void* context;
  };
  // The same with the payload in pieces, copied straight into the image
  // (the caller keeps the total within kMaxPayload, or for data records
  // within the configured maximum); `placed`, if given, is called once the
  // record is in place, with *settled. It must not wait on a sync.
  // *settled (if given) gets the position the record is durable past: its
  // own, or its last fragment's.
  // *stored (if given) gets what the record became in the segment.
  struct Stored {
    uint64_t bytes = 0;   // stored payload bytes (all fragments')
    bool packed = false;  // a compressed batch: inner positions 16 + 8 i (batch.h)
  };
  [[nodiscard]] Result<Position> append_gathered(Kind kind,
                                                 std::span<const std::span<const std::byte>> pieces,
                                                 const Placed* placed = nullptr,
                                                 Position* settled = nullptr,
                                                 Stored* stored = nullptr);
  [[nodiscard]] Result<Position> append_position(Kind kind, Position value);

  // Appends a sync marker naming `durable` and the wall-clock time, read
  // once the marker's space is reserved; with align > 8 its padding ends
  // it on an `align` boundary (tail=pad), so the next sync starts on a fresh
  // block. Returns the marker's end; *padding gets the padding bytes.
  [[nodiscard]] Result<Position> append_marker(Position durable, uint32_t align, uint64_t* padding);

  // Everything reserved so far ends before this position (the previous
  // session's end before the first append).
  Position head() const;
  // Waits until every append that began before the call is complete.
  void drain() const;

  // Writes the end record into the active segment and refuses further
  // appends; returns the position just past it (or, if nothing was ever
  // appended, the previous session's end: there is no segment to seal).
  [[nodiscard]] Result<Position> seal();

  // Segments of this session with id >= `from`, in order.
  std::vector<Segment*> segments_from(uint64_t from) const;
  // Drops segments below `id` from the list (they are complete and synced)
  // and returns them.
  std::vector<Segment*> forget_before(uint64_t id);
  // This session's first segment id; kNoSegment before the first append.
  uint64_t first_segment() const { return first_segment_.load(std::memory_order_acquire); }
  static constexpr uint64_t kNoSegment = UINT64_MAX;
  // Lets go of a segment forget_before() returned, once the backend has.
  void retire(Segment& segment) { manager_.retire(segment); }
  // The log stopped: appends waiting for a segment, and every later switch,
  // fail with `stopped`.
  void fail(Error stopped) { manager_.fail(std::move(stopped)); }

 private:
  [[nodiscard]] Result<void> advance_from(Segment* full, const SpaceWait& wait);
  // Becomes the one thread that switches segments, or fails at the deadline.
  [[nodiscard]] Result<void> claim_switch(const SpaceWait& wait);
  // Errc::no_space for a wait that ran out behind another append's switch.
  [[nodiscard]] Error behind_another(const SpaceWait& wait);
  // The next segment for the switching thread: a stashed one first.
  [[nodiscard]] Result<Segment*> take_next(const SpaceWait& wait);
  // A record in fragments: holds the switch for the whole record, takes the
  // segments it needs first, then closes the active segment and writes the
  // record from the start of the next one in one inflight window.
  [[nodiscard]] Result<Position> append_fragmented(
      std::span<const std::span<const std::byte>> pieces, uint64_t len, const Placed* placed,
      Position* settled, Stored* stored);
  // Frames a user record of `stored_len` stored bytes at seg[off], encrypting
  // `body` with the segment's cipher if flags say so. False if libcrypto
  // failed: the space then holds a sync marker naming 0:0, which every
  // reader passes over, and the append fails.
  [[nodiscard]] static bool frame(Segment& seg, uint64_t off, Kind kind, uint32_t flags,
                                  std::span<const std::span<const std::byte>> body,
                                  uint64_t stored_len);
  // For a writer whose reservation at `off` did not fit, inside its inflight
  // window: the one that crossed the end writes the end record.
  static void on_overflow(Segment* seg, uint64_t off);
  // Writes the session record into the session's first segment, before
  // any writer can see the segment.
  void begin_session(Segment& first);

  SegmentManager& manager_;
  const std::chrono::milliseconds allocation_timeout_;
  const uint64_t max_whole_;
  const RecordTransform transform_;
  metrics::Metrics& metrics_;
  inflight::Table inflight_;  // this log's writers only
  // Active until the first append: full (every reservation overflows into
  // advance_from, which takes the first segment), with no image or file.
  Segment placeholder_{0, kHeaderSize + kRecordHeaderSize, {}};
  Position previous_end_;
  std::atomic<Segment*> active_{nullptr};
  std::atomic<uint64_t> first_segment_{kNoSegment};
  mutable std::mutex mu_;  // live_, sealed_, switching_
  // One thread switches segments at a time (switching_); the others wait
  // for it only until their own deadline, so the syncer (whose deadline is
  // now) never waits behind a switch starved of space. (A timed_mutex would
  // do, but TSan cannot follow pthread_mutex_clocklock.)
  std::condition_variable switch_done_;
  bool switching_ = false;
  std::deque<Segment*> live_;
  bool sealed_ = false;
  // Segments a fragmented record took before it failed to take the rest,
  // in id order: the next switches use them first. Only the switching
  // thread touches it.
  std::deque<Segment*> stash_;
};

}  // namespace synclog::seg
