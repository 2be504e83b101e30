// How many CPUs this process can use: the most threads that can usefully
// spin at once (a spinner beyond that only takes a CPU from the thread it
// waits for).
#pragma once

#include <algorithm>
#include <thread>

namespace synclog::io {

inline unsigned cpu_count() {
  static const unsigned n = std::max(1u, std::thread::hardware_concurrency());
  return n;
}

}  // namespace synclog::io
