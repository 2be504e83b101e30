#include "slow_alloc.h"

#include <chrono>
#include <cstdlib>
#include <new>
#include <thread>

namespace {
thread_local int t_slow_allocs = 0;
}  // namespace

void* operator new(std::size_t n) {
  if (t_slow_allocs > 0) {
    --t_slow_allocs;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  void* p = std::malloc(n != 0 ? n : 1);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
// GCC cannot see that these pair with the operator new above.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace synclog::test {

void slow_allocations(int n) { t_slow_allocs = n; }

}  // namespace synclog::test
