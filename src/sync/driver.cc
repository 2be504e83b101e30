#include "sync/driver.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "io/clock.h"
#include "io/cpu.h"

namespace synclog::sync {
namespace {

// A parked thread takes 1-50 us to wake; a sync on fast media completes in
// about that. Spin this many pause instructions (a few us) before sleeping.
constexpr int kSpinBeforePark = 2000;
// Spinning pays only when the sync in flight ends within the spin; a sync
// slower than this (a disk's, 0.1 ms and up) is waited for parked, leaving
// the CPU to the writers that form the next batch.
constexpr uint64_t kSpinForSyncsUnderNs = 20'000;

uint64_t ns(std::chrono::microseconds us) { return static_cast<uint64_t>(us.count()) * 1000; }

}  // namespace

Driver::Driver(const Config& config, seg::Appender& appender, std::vector<Backend*> backends,
               Position durable, Position synced, uint32_t marker_align, metrics::Metrics& metrics)
    : config_(config),
      marker_align_(marker_align),
      metrics_(metrics),
      appender_(appender),
      backend_(*backends.at(0)),
      max_spinners_(std::max(1u, io::cpu_count() - 1)),
      durable_(durable.raw()),
      synced_(synced),
      issued_(synced.raw()) {
  lag_deadline_ns_.store(io::coarse_now_ns() + ns(config_.interval) + ns(config_.lag_bound));
  lanes_.resize(backends.size());
  for (size_t i = 0; i < backends.size(); ++i) {
    lanes_[i].backend = backends[i];
    idle_.push_back(&lanes_[i]);
  }
}

Driver::~Driver() {
  stopping_.store(true);
  kick();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void Driver::start() {
  if (!pipelined()) {
    threads_.emplace_back([this] { run(); });
    return;
  }
  for (size_t i = 0; i < lanes_.size(); ++i) threads_.emplace_back([this] { run_lane(); });
}

bool Driver::has_work() const {
  if (stopping_.load()) return true;
  // After a failure nothing is synced again; close() wakes the thread.
  if (failed_.load()) return false;
  if (pipelined()) return Position::from_raw(requested_.load()) > issued();
  const Position d = durable();
  if (Position::from_raw(requested_.load()) > d) return true;
  // Batch mode: blocking appenders lead their own syncs; the thread syncs
  // only what was requested (asynchronous appends, wait_until).
  if (config_.mode != SyncMode::group) return false;
  return appender_.head() > d;
}

void Driver::kick() {
  kick_.fetch_add(1);
  kick_.notify_all();
  { std::lock_guard lock(mu_); }
  cv_.notify_all();
}

void Driver::park() {
  const uint32_t k = kick_.load();
  parked_.fetch_add(1);
  if (!has_work()) kick_.wait(k);
  parked_.fetch_sub(1, std::memory_order_relaxed);
}

void Driver::sleep_until(uint64_t deadline_ns) {
  std::unique_lock lock(mu_);
  while (!stopping_.load() && !(Position::from_raw(requested_.load()) > durable())) {
    const uint64_t now = io::now_ns();
    if (now >= deadline_ns) return;
    cv_.wait_for(lock, std::chrono::nanoseconds(deadline_ns - now));
  }
}

void Driver::run_lane() {
  while (!stopping_.load()) {
    if (!has_work()) {
      park();
      continue;
    }
    Lane* lane = take_lane(true);
    auto r = sync_on(*lane);
    // Marked failed before the lane is free again (see wait_durable).
    if (!r) fail(r.error());
    give_lane(lane);
    nudge();
    if (!r) return;
  }
}

Driver::Lane* Driver::take_lane(bool wait) {
  std::unique_lock lock(lanes_mu_);
  if (wait) lanes_cv_.wait(lock, [&] { return !idle_.empty(); });
  if (idle_.empty()) return nullptr;
  Lane* lane = idle_.back();
  idle_.pop_back();
  for (seg::Segment* s : lane->retire) lane->backend->retire(*s);
  lane->retire.clear();
  return lane;
}

void Driver::give_lane(Lane* lane) {
  {
    std::lock_guard lock(lanes_mu_);
    idle_.push_back(lane);
  }
  lanes_cv_.notify_one();
}

Result<std::optional<Driver::Job>> Driver::reserve() {
  std::lock_guard lock(reserve_mu_);
  // Never sync again after a failed sync, even a range of its own: nothing
  // later may be acknowledged.
  if (failed_.load()) return failed_error();
  Job job;
  job.from = issued();
  if (appender_.head() <= job.from) return std::optional<Job>();
  uint64_t padding = 0;
  bool aligned = false;
  // The marker names the contiguous prefix published so far: a later sync
  // finishing first never vouches for a range still in flight.
  if (auto marker = appender_.append_marker(durable(), marker_align_, &padding)) {
    job.target = *marker;
    aligned = true;
    padding_.fetch_add(padding, std::memory_order_relaxed);
  } else if (marker.error().code == Errc::no_space || marker.error().code == Errc::closed) {
    job.target = appender_.head();
  } else {
    return std::unexpected(marker.error());
  }
  job.ticket = next_ticket_++;
  // Without a marker the range ends inside a block, which the next sync
  // writes again: that one waits for this one, or an older copy of the
  // block could land over a newer one.
  job.after_previous = !issued_aligned_;
  issued_aligned_ = aligned;
  issued_.store(job.target.raw(), std::memory_order_release);
  return job;
}

Result<void> Driver::sync_on(Lane& lane) {
  auto job = reserve();
  if (!job) return std::unexpected(job.error());
  if (!*job) return {};
  appender_.drain();
  return complete(lane, **job);
}

Result<void> Driver::complete(Lane& lane, const Job& job) {
  if (job.after_previous) {
    std::unique_lock lock(publish_mu_);
    publish_cv_.wait(lock, [&] { return publish_next_ >= job.ticket || failed_.load(); });
    if (failed_.load()) return failed_error();
  }
  const uint64_t start = io::now_ns();
  if (auto rs = ranges(job.from, job.target); !rs.empty()) {
    if (auto r = lane.backend->persist(rs); !r) return r;
  }
  const uint64_t took = io::now_ns() - start;
  last_persist_ns_.store(took, std::memory_order_relaxed);
  metrics::Shard& shard = metrics_.local();
  shard.record(metrics::Hist::sync, took);
  shard.add(metrics::Count::syncs, 1);
  std::vector<seg::Segment*> done;
  {
    std::lock_guard lock(publish_mu_);
    finished_.emplace(job.ticket, job.target);
    std::optional<Position> newest;
    for (auto it = finished_.begin(); it != finished_.end() && it->first == publish_next_;
         it = finished_.erase(it)) {
      newest = it->second;
      ++publish_next_;
    }
    // After a failure the prefix stops where it was: nothing is
    // acknowledged any more anyway.
    if (newest && !failed_.load()) {
      done = appender_.forget_before(newest->segment());
      publish(*newest);
    }
  }
  publish_cv_.notify_all();
  retire_segments(done);
  return {};
}

void Driver::retire_segments(const std::vector<seg::Segment*>& done) {
  if (done.empty()) return;
  {
    std::lock_guard lock(lanes_mu_);
    for (Lane& lane : lanes_) {
      const bool idle = std::find(idle_.begin(), idle_.end(), &lane) != idle_.end();
      for (seg::Segment* s : done) {
        if (idle) {
          lane.backend->retire(*s);
        } else {
          lane.retire.push_back(s);
        }
      }
    }
  }
  // A busy lane may still hold the segment's file or pinned image in its
  // slots: harmless, it drops them before its next write.
  for (seg::Segment* s : done) appender_.retire(*s);
}

void Driver::run() {
  uint64_t next_tick = io::now_ns() + ns(config_.interval);
  while (!stopping_.load()) {
    if (config_.mode == SyncMode::periodic) {
      sleep_until(next_tick);
      const uint64_t now = io::now_ns();
      if (now >= next_tick) next_tick = now + ns(config_.interval);
    } else if (!has_work()) {
      park();
      continue;
    } else if (config_.mode == SyncMode::group) {
      sleep_until(last_sync_start_ns_ + ns(config_.window));
    }
    if (stopping_.load()) break;
    if (config_.mode == SyncMode::batch) {
      // The lead, as an appender takes it: the failure is marked before the
      // lead is released (see wait_durable).
      {
        std::lock_guard lead(leader_);
        if (!failed_.load() && Position::from_raw(requested_.load()) > durable()) {
          if (auto r = sync_once(); !r) {
            fail(r.error());
            return;
          }
        }
      }
      // An appender that found the lead taken waits for a new generation;
      // one whose record this sync did not cover would otherwise sleep on
      // after the unlock with no one left to lead (seen with async appends
      // and append_batch mixed on aio).
      nudge();
      continue;
    }
    const Position d = durable();
    if (appender_.head() > d || Position::from_raw(requested_.load()) > d) {
      if (auto r = sync_once(); !r) {
        fail(r.error());
        return;
      }
    }
    if (config_.mode == SyncMode::periodic) {
      // Nothing lags after a completed (or needless) sync: move the bound.
      lag_deadline_ns_.store(io::coarse_now_ns() + ns(config_.interval) + ns(config_.lag_bound));
      generation_.fetch_add(1, std::memory_order_release);
      generation_.notify_all();
    }
  }
}

Result<void> Driver::sync_once() {
  // Never sync again after a failed sync: that retry is what could lie.
  if (failed_.load()) return failed_error();
  last_sync_start_ns_ = io::now_ns();
  const Position before = durable();
  Position target;
  uint64_t padding = 0;
  if (auto marker = appender_.append_marker(before, marker_align_, &padding)) {
    target = *marker;
    padding_.fetch_add(padding, std::memory_order_relaxed);
  } else if (marker.error().code == Errc::no_space || marker.error().code == Errc::closed) {
    // No room for a marker (the next segment is not there yet): sync what
    // exists. Reading the head is the reservation the drain is ordered after.
    target = appender_.head();
  } else {
    return std::unexpected(marker.error());
  }
  appender_.drain();
  const uint64_t start = io::now_ns();
  if (auto r = persist_through(target); !r) return r;
  const uint64_t took = io::now_ns() - start;
  last_persist_ns_.store(took, std::memory_order_relaxed);
  metrics::Shard& shard = metrics_.local();
  shard.record(metrics::Hist::sync, took);
  shard.add(metrics::Count::syncs, 1);
  publish(target);
  return {};
}

std::vector<Range> Driver::ranges(Position from, Position target) const {
  std::vector<Range> out;
  for (seg::Segment* s : appender_.segments_from(from.segment())) {
    if (s->id() > target.segment()) break;
    const uint64_t start = s->id() == from.segment() ? from.offset() : seg::kHeaderSize;
    uint64_t to = target.offset();
    if (s->id() < target.segment()) {
      // Sealed: its end record was written before the switch we are past.
      to = s->sealed_end.load(std::memory_order_acquire);
      if (to == 0) to = s->size();
    }
    if (to > start) out.push_back(Range{s, start, to});
  }
  return out;
}

Result<void> Driver::persist_through(Position target) {
  if (target <= synced_) return {};
  if (auto rs = ranges(synced_, target); !rs.empty()) {
    if (auto r = backend_.persist(rs); !r) return r;
  }
  synced_ = target;
  // Complete segments need no image any more (a direct segment's is
  // private memory as large as the file).
  for (seg::Segment* s : appender_.forget_before(target.segment())) {
    backend_.retire(*s);
    appender_.retire(*s);
  }
  return {};
}

void Driver::publish(Position durable) {
  // Sequentially consistent: a timed waiter counts itself, then reads the
  // position; this side stores, then reads the count (tell_watchers).
  durable_.store(durable.raw());
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  tell_watchers();
}

void Driver::tell_watchers() {
  if (timed_waiters_.load() > 0) {
    { std::lock_guard lock(mu_); }
    durable_cv_.notify_all();
  }
  if (notify_fd_.load(std::memory_order_acquire) >= 0) {
    // A loop that is never woken would wait for ever: stop the log instead
    // (nothing durable is lost, and every waiter learns why).
    if (auto r = event_.signal(); !r && !failed_.load()) fail(r.error());
  }
}

void Driver::nudge() {
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
}

Result<int> Driver::notify_fd() {
  std::lock_guard lock(mu_);
  if (notify_fd_.load() < 0) {
    auto e = io::EventFd::create();
    if (!e) return std::unexpected(e.error());
    event_ = std::move(*e);
    notify_fd_.store(event_.fd(), std::memory_order_release);
  }
  return event_.fd();
}

void Driver::stop(Error stopped) {
  if (failed_.load()) return;
  fail(std::move(stopped), true);
}

void Driver::fail(Error error, bool whole) {
  if (config_.on_sync_failure == FailurePolicy::abort) {
    std::fprintf(stderr, "synclog: %s, aborting (on_sync_failure=abort): %s\n",
                 whole ? "the log stopped" : "sync failed", error.describe().c_str());
    std::abort();
  }
  {
    std::lock_guard lock(mu_);
    if (!failure_) {
      failure_ = std::move(error);
      failure_whole_ = whole;
    }
  }
  failed_.store(true);
  // An append waiting for a segment wakes too, and no later one waits.
  appender_.fail(failed_error().error());
  {
    // A sync waiting in complete() for the one before it (which had no
    // marker) must wake: that one will never publish. try_lock, since
    // publish() can fail from under publish_mu_; any holder keeps a waiter
    // out of the gap between its check and its sleep, so the notify below
    // cannot be lost.
    std::unique_lock gap(publish_mu_, std::try_to_lock);
  }
  publish_cv_.notify_all();
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  tell_watchers();
}

std::optional<Error> Driver::failure() const {
  std::lock_guard lock(mu_);
  return failure_;
}

std::unexpected<Error> Driver::failed_error() const {
  std::lock_guard lock(mu_);
  if (failure_whole_) return std::unexpected(*failure_);
  return make_error(
      Errc::failed,
      "the log stopped after a failed sync; nothing later is acknowledged: " + failure_->message,
      failure_->sys_errno);
}

Result<void> Driver::wait_durable(Position target, bool inclusive) {
  auto done = [&] {
    const uint64_t d = durable_.load(std::memory_order_acquire);
    return inclusive ? d >= target.raw() : d > target.raw();
  };
  const bool may_lead = config_.mode == SyncMode::batch;
  for (;;) {
    const uint32_t g = generation_.load(std::memory_order_acquire);
    // Failure first: once a sync failed nothing is acknowledged, whatever
    // the durable position says.
    if (failed_.load()) return failed_error();
    if (done()) return {};
    if (may_lead && pipelined()) {
      // A record no reserved sync covers yet: lead one on a free lane.
      const bool covered = inclusive ? target <= issued() : target < issued();
      Lane* lane = covered ? nullptr : take_lane(false);
      if (lane != nullptr) {
        Result<void> r;
        if (!failed_.load() && !done()) r = sync_on(*lane);
        if (!r) fail(r.error());
        give_lane(lane);
        generation_.fetch_add(1, std::memory_order_release);
        generation_.notify_all();
        continue;
      }
    } else if (may_lead && leader_.try_lock()) {
      // Everything reserved so far, this target included, is covered by the
      // marker sync_once() reserves now.
      if (!failed_.load() && !done()) {
        // Marked failed before the lead is released: a next leader would
        // sync the same range again, and after a failed writeback the
        // kernel reports the pages clean (fsyncgate), so that retry would
        // succeed without the data being durable.
        if (auto r = sync_once(); !r) fail(r.error());
      }
      leader_.unlock();
      // Followers that looked before the unlock must look again.
      generation_.fetch_add(1, std::memory_order_release);
      generation_.notify_all();
      continue;
    }
    // A follower: the sync in flight (or the next one) covers the target.
    // Spin only while a CPU is free for it: with more waiters than CPUs,
    // spinners starve the leader and the writers that gather the next batch.
    bool changed = false;
    const bool quick = last_persist_ns_.load(std::memory_order_relaxed) < kSpinForSyncsUnderNs;
    if (quick && spinners_.fetch_add(1, std::memory_order_relaxed) < max_spinners_) {
      for (int i = 0; i < kSpinBeforePark && !changed; ++i) {
        _mm_pause();
        changed = generation_.load(std::memory_order_acquire) != g;
      }
    }
    if (quick) spinners_.fetch_sub(1, std::memory_order_relaxed);
    if (!changed) generation_.wait(g, std::memory_order_acquire);
  }
}

Result<void> Driver::after_append(Position pos) {
  if (config_.mode == SyncMode::batch) return wait_durable(pos, false);
  if (config_.mode == SyncMode::group) {
    if (parked_.load() > 0) kick();
    return wait_durable(pos, false);
  }
  uint64_t now = io::coarse_now_ns();
  if (now <= lag_deadline_ns_.load(std::memory_order_relaxed)) return {};
  lag_blocked_.fetch_add(1, std::memory_order_relaxed);
  const uint64_t lag_us =
      (now - (lag_deadline_ns_.load() - ns(config_.interval) - ns(config_.lag_bound))) / 1000;
  uint64_t seen = max_lag_us_.load(std::memory_order_relaxed);
  while (seen < lag_us && !max_lag_us_.compare_exchange_weak(seen, lag_us)) {
  }
  for (;;) {
    const uint32_t g = generation_.load(std::memory_order_acquire);
    if (failed_.load()) return failed_error();
    if (io::coarse_now_ns() <= lag_deadline_ns_.load()) return {};
    generation_.wait(g, std::memory_order_acquire);
  }
}

void Driver::request(Position target) {
  uint64_t want = requested_.load();
  while (want < target.raw() && !requested_.compare_exchange_weak(want, target.raw())) {
  }
  // Sequentially consistent with park(): either it sees the request or
  // this sees it parked.
  if (parked_.load() > 0) kick();
}

Result<void> Driver::after_async_append(Position pos) {
  switch (config_.mode) {
    case SyncMode::batch:
      request(Position::from_raw(pos.raw() + 1));
      return {};
    case SyncMode::group:
      if (parked_.load() > 0) kick();
      return {};
    case SyncMode::periodic:
      return after_append(pos);
  }
  return {};
}

Result<void> Driver::wait_until(Position pos, std::chrono::steady_clock::time_point deadline) {
  auto done = [&] { return durable_.load() > pos.raw(); };
  if (failed_.load()) return failed_error();
  if (done()) return {};
  const Position head = appender_.head();
  if (pos >= head) {
    return make_error(Errc::invalid_argument, "position " + pos.to_string() +
                                                  " was never appended (the log ends at " +
                                                  head.to_string() + ")");
  }
  if (config_.mode == SyncMode::batch) request(Position::from_raw(pos.raw() + 1));
  std::unique_lock lock(mu_);
  timed_waiters_.fetch_add(1);
  struct Leave {
    std::atomic<uint32_t>& n;
    ~Leave() { n.fetch_sub(1); }
  } leave{timed_waiters_};
  for (;;) {
    if (failed_.load()) {
      lock.unlock();
      return failed_error();
    }
    if (done()) return {};
    if (closed_.load()) {
      return make_error(Errc::closed,
                        "the log was closed before " + pos.to_string() + " became durable");
    }
    if (durable_cv_.wait_until(lock, deadline) == std::cv_status::timeout && !done() &&
        !failed_.load()) {
      return make_error(Errc::timeout, "position " + pos.to_string() +
                                           " is not durable yet (durable up to " +
                                           durable().to_string() + ")");
    }
  }
}

Result<void> Driver::sync() {
  if (failed_.load()) return failed_error();
  const Position target = appender_.head();
  if (durable() >= target) return {};
  if (config_.mode == SyncMode::batch) return wait_durable(target, true);
  uint64_t want = requested_.load();
  while (want < target.raw() && !requested_.compare_exchange_weak(want, target.raw())) {
  }
  kick();
  return wait_durable(target, true);
}

Result<void> Driver::close() {
  stopping_.store(true);
  kick();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  std::lock_guard lead(leader_);  // batch mode: no appender is leading now
  // Pipelined: every lane, so no sync is in flight and none starts.
  std::vector<Lane*> held;
  if (pipelined()) {
    for (size_t i = 0; i < lanes_.size(); ++i) held.push_back(take_lane(true));
  }
  // However close ends, watchers learn that nothing more becomes durable.
  struct Closed {
    Driver& d;
    ~Closed() {
      d.closed_.store(true);
      d.nudge();
      d.tell_watchers();
    }
  } closed{*this};
  if (failed_.load()) return failed_error();
  auto finish_pipelined = [&]() -> Result<void> {
    if (auto r = sync_on(*held[0]); !r) return r;
    auto end = appender_.seal();
    if (!end) return std::unexpected(end.error());
    Job job;
    {
      std::lock_guard lock(reserve_mu_);
      job = Job{next_ticket_++, issued(), *end, false};
      issued_.store(end->raw(), std::memory_order_release);
    }
    return complete(*held[0], job);
  };
  auto finish = [&]() -> Result<void> {
    if (pipelined()) return finish_pipelined();
    if (auto r = sync_once(); !r) return r;
    auto end = appender_.seal();
    if (!end) return std::unexpected(end.error());
    if (auto r = persist_through(*end); !r) return r;
    publish(*end);
    return {};
  };
  if (auto r = finish(); !r) {
    fail(r.error());
    return r;
  }
  return {};
}

DriverStats Driver::stats() const {
  return DriverStats{lag_blocked_.load(), max_lag_us_.load(), padding_.load()};
}

}  // namespace synclog::sync
