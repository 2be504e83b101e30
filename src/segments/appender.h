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
#include "synclog/error.h"
#include "synclog/position.h"

namespace synclog::seg {

class Appender {
 public:
  Appender(SegmentManager& manager, std::chrono::milliseconds allocation_timeout,
           metrics::Metrics& metrics)
      : manager_(manager), allocation_timeout_(allocation_timeout), metrics_(metrics) {}

  // Takes the session's first segment and writes the session record naming
  // where the previous session's log ended.
  [[nodiscard]] Result<void> start(Position previous_end);

  // Appends one record; returns where it starts.
  [[nodiscard]] Result<Position> append(Kind kind, std::span<const std::byte> payload);
  [[nodiscard]] Result<Position> append_position(Kind kind, Position value);

  // Appends a sync marker naming `durable`; with align > 8 its padding ends
  // it on an `align` boundary (tail=pad), so the next sync starts on a fresh
  // block. Returns the marker's end; *padding gets the padding bytes.
  [[nodiscard]] Result<Position> append_marker(Position durable, uint32_t align, uint64_t* padding);

  // Everything reserved so far ends before this position.
  Position head() const;
  // Waits until every append that began before the call is complete.
  void drain() const;

  // Writes the end record into the active segment and refuses further
  // appends; returns the position just past it.
  [[nodiscard]] Result<Position> seal();

  // Segments of this session with id >= `from`, in order.
  std::vector<Segment*> segments_from(uint64_t from) const;
  // Drops segments below `id` from the list (they are complete and synced)
  // and returns them.
  std::vector<Segment*> forget_before(uint64_t id);
  uint64_t first_segment() const { return first_segment_; }
  // Lets go of a segment forget_before() returned, once the backend has.
  void retire(Segment& segment) { manager_.retire(segment); }

 private:
  [[nodiscard]] Result<void> advance_from(Segment* full,
                                          std::chrono::steady_clock::time_point deadline);
  // For a writer whose reservation at `off` did not fit, inside its inflight
  // window: the one that crossed the end writes the end record.
  static void on_overflow(Segment* seg, uint64_t off);
  void install(Segment* next);

  SegmentManager& manager_;
  const std::chrono::milliseconds allocation_timeout_;
  metrics::Metrics& metrics_;
  inflight::Table inflight_;  // this log's writers only
  std::atomic<Segment*> active_{nullptr};
  uint64_t first_segment_ = 0;
  mutable std::mutex mu_;  // live_, sealed_, switching_
  // One thread switches segments at a time (switching_); the others wait
  // for it only until their own deadline, so the syncer (whose deadline is
  // now) never waits behind a switch starved of space. (A timed_mutex would
  // do, but TSan cannot follow pthread_mutex_clocklock.)
  std::condition_variable switch_done_;
  bool switching_ = false;
  std::deque<Segment*> live_;
  bool sealed_ = false;
};

}  // namespace synclog::seg
