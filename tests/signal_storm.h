// A signal storm, as engines live with (profilers' SIGPROF, Go's SIGURG
// preemption, timers): a thread sends SIGURG to every other thread of the
// process every `period`, and the handler is installed without SA_RESTART,
// so every blocking call in the library can return early (EINTR, a short
// count, or io_uring_enter's "submitted, not waited").
//
// Thread-directed (tgkill), not process-directed: a process-directed signal
// goes to whichever thread the kernel picks, mostly the busy main thread,
// and rarely reaches the sync or completion thread blocked in the kernel.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

namespace synclog::test {

class SignalStorm {
 public:
  explicit SignalStorm(std::chrono::microseconds period);
  ~SignalStorm();
  SignalStorm(const SignalStorm&) = delete;
  SignalStorm& operator=(const SignalStorm&) = delete;

  // $SYNCLOG_TEST_SIGNAL_HZ signals per second to each thread (0 or unset:
  // none, nullptr). For the campaigns, so the same binary runs with and
  // without a storm.
  static std::unique_ptr<SignalStorm> from_env();

  // Handler runs in this process since it started (any storm's).
  static uint64_t delivered();
  uint64_t sent() const { return sent_.load(std::memory_order_relaxed); }

 private:
  void run();

  const std::chrono::microseconds period_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> sent_{0};
  std::thread thread_;
};

// Blocks the storm's signal in the calling thread while it lives: for a
// test's own work (std::filesystem::copy gives up on EINTR), never around
// calls into the library. Signals sent meanwhile are handled at the end.
class SignalShelter {
 public:
  SignalShelter();
  ~SignalShelter();
  SignalShelter(const SignalShelter&) = delete;
  SignalShelter& operator=(const SignalShelter&) = delete;
};

// "N signals" for a campaign's summary line; "" without a storm.
std::string storm_summary(const SignalStorm* storm);

}  // namespace synclog::test
