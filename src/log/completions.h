// Completion callbacks of asynchronous appends, run in position order on
// one thread of the log once the driver has made them durable, or with the
// error once the log failed or closed. The thread starts at the first
// callback, so a log that never uses them has no such thread.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "sync/driver.h"
#include "synclog/error.h"
#include "synclog/position.h"

namespace synclog {

class Completions {
 public:
  using Callback = std::function<void(Result<Position>)>;

  explicit Completions(sync::Driver& driver) : driver_(driver) {}
  ~Completions() { stop(); }
  Completions(const Completions&) = delete;
  Completions& operator=(const Completions&) = delete;

  // Starts the thread if it is not running. Called before the record goes
  // in flight: creating a thread inside the in-flight window would hold up
  // the sync that must wait for the registration.
  void start();
  // Arranges one call of `done` with `pos` once durable() passes `settled`
  // (the record's last fragment, or `pos` itself), after start().
  void add(Position settled, Position pos, Callback done);
  // Once the driver is closed: runs or fails what is left, stops the thread.
  void stop();
  // Callbacks registered and not yet run.
  size_t pending() const;
  // Whether the caller is this object's callback thread (a callback).
  bool on_callback_thread() const;
  // Callbacks that threw, and the first one's what().
  uint64_t exceptions() const;
  std::string first_exception() const;

 private:
  void run();
  // Runs every callback whose fate is known; returns whether any were left.
  bool fire_ready();

  sync::Driver& driver_;
  mutable std::mutex mu_;
  struct Pending {
    Position pos;
    Callback done;
  };
  std::map<uint64_t, Pending> pending_;  // by raw settled position
  uint64_t exceptions_ = 0;
  std::string first_exception_;
  std::once_flag started_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace synclog
