// The sync driver: one thread that decides when to sync (periodic, batch or
// group mode), and the waiting side for appenders.
//
// In batch mode an appender that finds no sync running leads one for
// everybody (leader/follower group commit), so a lone writer never hands
// off; the thread there syncs only for asynchronous appends, which wait for
// no one to lead. A sync: reserve a sync marker through the appender (its end is the target;
// its payload is the durable position so far, which recovery uses to tell
// damage from a torn tail), drain writers below it, hand the ranges to the
// backend, publish the new durable position and wake the waiters. Waiters
// spin briefly, then sleep on one futex word bumped once per sync: no
// allocation per wait.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "io/event_fd.h"
#include "metrics/metrics.h"
#include "segments/appender.h"
#include "sync/backend.h"
#include "synclog/config.h"
#include "synclog/error.h"
#include "synclog/position.h"

namespace synclog::sync {

struct DriverStats {
  uint64_t lag_blocked = 0;
  uint64_t max_lag_us = 0;
  uint64_t padding_bytes = 0;
};

class Driver {
 public:
  // `durable` is where recovery ended; `synced` is the first byte of this
  // session that no sync has covered yet (Position{} while the session has
  // no segment: a sync then starts after the header of each of its segments).
  // `marker_align` > 8 pads every sync to that boundary (direct I/O, tail=pad).
  // `backends` holds config.syncs_in_flight of them, one per sync in flight.
  Driver(const Config& config, seg::Appender& appender, std::vector<Backend*> backends,
         Position durable, Position synced, uint32_t marker_align, metrics::Metrics& metrics);
  ~Driver();

  void start();

  // After an append at `pos`: batch and group wait until it is durable;
  // periodic only blocks while the syncer lags past its bound.
  [[nodiscard]] Result<void> after_append(Position pos);
  // After an asynchronous append at `pos`: arranges that a sync will cover
  // it without this thread waiting (batch mode asks the thread for one,
  // group mode wakes it, periodic leaves it to the next tick and blocks only
  // while the syncer lags past its bound, as after_append does).
  [[nodiscard]] Result<void> after_async_append(Position pos);
  // Waits until the record at `pos` is durable, the log fails or closes, or
  // `deadline` passes (Errc::timeout). Never leads a sync itself.
  [[nodiscard]] Result<void> wait_until(Position pos,
                                        std::chrono::steady_clock::time_point deadline);
  // Makes everything appended before the call durable.
  [[nodiscard]] Result<void> sync();
  // Stops the thread, syncs the rest, seals the active segment and syncs the
  // end record.
  [[nodiscard]] Result<void> close();

  Position durable() const { return Position::from_raw(durable_.load(std::memory_order_acquire)); }
  // Acquire: a reader that sees the failure also sees its cause (failure()).
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // The sync error the log failed on, if any.
  std::optional<Error> failure() const;
  // Errc::failed, naming the cause (a sync error, or stop()). Only after failed().
  std::unexpected<Error> failed_error() const;
  // Stops the log for a failure outside a sync (a segment the manager could
  // not make), as a failed sync does: `stopped` (Errc::failed, the whole
  // message) is what every waiting and later call gets. No-op once failed.
  void stop(Error stopped);
  // After close(): nothing more will become durable.
  bool closed() const { return closed_.load(std::memory_order_acquire); }

  // A word that changes at every publish of a durable position, failure and
  // close, for threads that follow durability (completion callbacks).
  uint32_t generation() const { return generation_.load(std::memory_order_acquire); }
  void wait_generation(uint32_t seen) const { generation_.wait(seen, std::memory_order_acquire); }
  // Changes the word without anything happening: a watcher looks again.
  void nudge();
  // An eventfd signalled at every publish, failure and close; made at the
  // first call, signalled from then on.
  [[nodiscard]] Result<int> notify_fd();
  DriverStats stats() const;

 private:
  void run();
  bool has_work() const;
  void park();
  void sleep_until(uint64_t deadline_ns);
  void kick();
  [[nodiscard]] Result<void> sync_once();
  [[nodiscard]] Result<void> persist_through(Position target);
  void publish(Position durable);
  // `whole`: the error's message says it all (stop()); otherwise it is the
  // cause of a failed sync.
  void fail(Error error, bool whole = false);
  // Wakes timed waiters and signals the eventfd.
  void tell_watchers();
  [[nodiscard]] Result<void> wait_durable(Position target, bool inclusive);
  // Batch mode: asks the thread for a sync that covers `target`.
  void request(Position target);
  // The byte ranges of the segments in [from, to) (Position{} as `from`:
  // from the header end of each of the session's segments).
  std::vector<Range> ranges(Position from, Position to) const;

  // Pipelined syncs (syncs_in_flight > 1). A sync is reserved in ticket
  // order (its marker, so its range follows the previous sync's), persisted
  // on a lane of its own, then published once every earlier ticket has
  // finished: durable() only ever covers a contiguous prefix.
  struct Lane {
    Backend* backend = nullptr;
    std::vector<seg::Segment*> retire;  // complete segments to drop before its next sync
  };
  struct Job {
    uint64_t ticket = 0;
    Position from;
    Position target;
    bool after_previous = false;  // starts inside the previous sync's last block
  };
  bool pipelined() const { return lanes_.size() > 1; }
  Position issued() const { return Position::from_raw(issued_.load(std::memory_order_acquire)); }
  void run_lane();
  Lane* take_lane(bool wait);
  void give_lane(Lane* lane);
  // Reserves the next sync (nullopt: nothing new to sync).
  [[nodiscard]] Result<std::optional<Job>> reserve();
  [[nodiscard]] Result<void> sync_on(Lane& lane);
  [[nodiscard]] Result<void> complete(Lane& lane, const Job& job);
  // Drops segments every lane is done with (each lane's own slots for them
  // at its next take if it is busy now).
  void retire_segments(const std::vector<seg::Segment*>& done);

  const Config config_;
  const uint32_t marker_align_;
  metrics::Metrics& metrics_;
  seg::Appender& appender_;
  Backend& backend_;  // the first lane's

  const uint32_t max_spinners_;  // followers that may spin at once; the rest park
  std::atomic<uint32_t> spinners_{0};
  std::atomic<uint64_t> last_persist_ns_{0};  // how long the last sync took
  std::atomic<uint64_t> durable_;
  std::atomic<uint32_t> generation_{0};  // bumped after each publish; waiters sleep on it
  std::atomic<uint32_t> kick_{0};        // wakes a parked syncer
  std::atomic<uint32_t> parked_{0};      // syncer threads parked
  std::atomic<uint64_t> requested_{0};   // sync(): raw position callers wait for
  std::atomic<uint64_t> lag_deadline_ns_{0};
  std::atomic<bool> failed_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> closed_{false};
  std::atomic<uint32_t> timed_waiters_{0};
  std::atomic<int> notify_fd_{-1};  // event_.fd() once made

  std::mutex leader_;      // batch mode: held by the appender syncing for all
  mutable std::mutex mu_;  // failure_, timed sleeps
  std::condition_variable cv_;
  std::condition_variable durable_cv_;  // timed waiters (wait_until)
  std::optional<Error> failure_;
  bool failure_whole_ = false;  // failure_ came from stop()
  io::EventFd event_;           // made under mu_

  Position synced_;  // the syncer thread, or the batch leader (close() after both)
  uint64_t last_sync_start_ns_ = 0;
  std::atomic<uint64_t> lag_blocked_{0};
  std::atomic<uint64_t> max_lag_us_{0};
  std::atomic<uint64_t> padding_{0};
  std::vector<std::thread> threads_;  // one per lane

  std::vector<Lane> lanes_;
  std::mutex lanes_mu_;  // idle_, every Lane::retire
  std::condition_variable lanes_cv_;
  std::vector<Lane*> idle_;
  std::mutex reserve_mu_;         // next_ticket_, issued_aligned_; issued_'s stores
  std::atomic<uint64_t> issued_;  // raw: where the last reserved sync ends
  uint64_t next_ticket_ = 0;
  bool issued_aligned_ = true;
  std::mutex publish_mu_;  // publish_next_, finished_, the publishes of pipelined syncs
  std::condition_variable publish_cv_;
  uint64_t publish_next_ = 0;              // the oldest ticket not yet published
  std::map<uint64_t, Position> finished_;  // persisted, waiting for an earlier ticket
};

}  // namespace synclog::sync
