// Clocks. The monotonic ones measure durations; the coarse one costs a few
// ns (vDSO, no TSC read) and is what the append hot path may consult. The
// wall clock is only for stamping sync markers (restore to a time): it may
// step backwards, so nothing may order by it.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace synclog::io {

inline uint64_t now_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t coarse_now_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// CLOCK_REALTIME in nanoseconds since the Unix epoch.
inline uint64_t wall_now_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// steady_clock::now() + timeout, saturating: a timeout too large for the
// clock waits as long as the clock can count, never wraps into the past.
template <class Rep, class Period>
std::chrono::steady_clock::time_point deadline_after(std::chrono::duration<Rep, Period> timeout) {
  using Clock = std::chrono::steady_clock;
  const auto now = Clock::now();
  if (timeout <= timeout.zero()) return now;
  const auto room = std::chrono::duration_cast<std::chrono::duration<Rep, Period>>(
      Clock::time_point::max() - now);
  if (timeout >= room) return Clock::time_point::max();
  return now + std::chrono::duration_cast<Clock::duration>(timeout);
}

}  // namespace synclog::io
