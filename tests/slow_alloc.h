// Widens race windows after a failure without touching the library: a test
// binary linked with slow_alloc.cc replaces the global operator new, and
// after slow_allocations(n) the next n allocations on the calling thread
// each sleep 100 us. A window between a failure and its handling that
// allocates anything (an Error's message, a copy of it) then stays open for
// long enough that another thread's arrival lands inside it.
#pragma once

namespace synclog::test {

void slow_allocations(int n);

}  // namespace synclog::test
