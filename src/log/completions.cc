#include "log/completions.h"

#include <exception>
#include <optional>
#include <utility>
#include <vector>

namespace synclog {
namespace {

// The Completions object whose thread this is, if any.
thread_local const Completions* t_running = nullptr;

}  // namespace

bool Completions::on_callback_thread() const { return t_running == this; }

uint64_t Completions::exceptions() const {
  std::lock_guard lock(mu_);
  return exceptions_;
}

std::string Completions::first_exception() const {
  std::lock_guard lock(mu_);
  return first_exception_;
}

void Completions::start() {
  std::call_once(started_, [this] { thread_ = std::thread([this] { run(); }); });
}

void Completions::add(Position settled, Position pos, Callback done) {
  {
    std::lock_guard lock(mu_);
    pending_.emplace(settled.raw(), Pending{pos, std::move(done)});
  }
  // The thread may have looked, and gone to sleep, before the insert: if
  // nothing more will happen to wake it, make it look again.
  if (driver_.durable() > settled || driver_.failed() || driver_.closed()) driver_.nudge();
}

size_t Completions::pending() const {
  std::lock_guard lock(mu_);
  return pending_.size();
}

bool Completions::fire_ready() {
  std::vector<std::pair<uint64_t, Pending>> ready;
  bool failed = false, closed = false;
  uint64_t durable = 0;
  {
    std::lock_guard lock(mu_);
    // Failure is read before the durable position: a record is reported
    // durable only if the position covered it before the log failed.
    failed = driver_.failed();
    closed = driver_.closed();
    durable = driver_.durable().raw();
    auto end = failed || closed ? pending_.end() : pending_.lower_bound(durable);
    for (auto it = pending_.begin(); it != end;) {
      auto node = pending_.extract(it++);
      ready.emplace_back(node.key(), std::move(node.mapped()));
    }
  }
  std::optional<Error> error;
  if (failed) error = driver_.failed_error().error();
  for (auto& [raw, p] : ready) {
    const Position pos = p.pos;
    const Callback& done = p.done;
    // A callback that throws must not take the others with it (nor the
    // process): the exception is counted and kept for stats().
    try {
      if (raw < durable && !failed) {
        done(pos);
      } else if (error) {
        done(std::unexpected(*error));
      } else {
        done(make_error(Errc::closed,
                        "the log was closed before " + pos.to_string() + " became durable"));
      }
    } catch (...) {
      std::string what = "completion callback for " + pos.to_string() + " threw ";
      try {
        throw;
      } catch (const std::exception& e) {
        what += std::string("'") + e.what() + "'";
      } catch (...) {
        what += "an exception not derived from std::exception";
      }
      std::lock_guard lock(mu_);
      if (exceptions_++ == 0) first_exception_ = std::move(what);
    }
  }
  // A callback may have appended again: its callback is pending now.
  return pending() > 0;
}

void Completions::run() {
  t_running = this;
  for (;;) {
    const uint32_t seen = driver_.generation();
    const bool left = fire_ready();
    if (stopping_.load() && !left) return;
    driver_.wait_generation(seen);
  }
}

void Completions::stop() {
  if (!thread_.joinable()) return;
  stopping_.store(true);
  driver_.nudge();
  thread_.join();
}

}  // namespace synclog
