// Calls that a signal can interrupt (EINTR) are repeated, a bounded number
// of times. A handler installed without SA_RESTART (profilers, language
// runtimes, timers) makes any blocking call return EINTR, and for fsync and
// friends EINTR means "not done": the writeback error state is untouched,
// so repeating is safe where repeating after EIO would not be.
#pragma once

#include <cerrno>

namespace synclog::io {

// How many EINTRs in a row a call survives: far more than a signal storm of
// 10 kHz produces during one call, few enough to end a livelock.
inline constexpr int kMaxInterrupts = 10'000;

// `op` returns 0 or an errno value.
template <class F>
int restarting(F&& op) {
  int err = 0;
  for (int i = 0; i < kMaxInterrupts; ++i) {
    err = op();
    if (err != EINTR) return err;
  }
  return err;
}

}  // namespace synclog::io
