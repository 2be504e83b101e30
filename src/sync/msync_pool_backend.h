// msync-pool: N persistent worker threads msync page-aligned slices of the
// pending ranges in parallel, so one thread's msync rate no longer caps the
// log (docs/backends.md).
//
// Threads. `threads` is the number of *worker* threads (>= 1). The caller of
// persist() (the sync driver) always does a share of the work as well, so a
// persist runs on at most threads + 1 threads: threads = 1 is the caller and
// one worker. Meant to receive Config::sync_threads unchanged.
//
// Slicing. persist() treats its ranges as one sequence of bytes (each range
// widened down to a page boundary; overlapping ranges are not merged, just
// synced twice, which is harmless). It cuts that sequence into
// k = min(threads + 1, total / min_slice_bytes) slices of about equal size,
// every cut on a page boundary of its segment. k <= 1, i.e. any persist of
// less than 2 * min_slice_bytes, runs on the caller alone: no hand-off, no
// wake-up. Otherwise the caller keeps slice 0 and workers 0..k-2 get one
// slice each; workers past k-2 are not touched (never woken).
//
// Hand-off. Each worker owns one preallocated, cache-line-sized slot with its
// own futex word (std::atomic wait/notify): no per-task allocation, no shared
// queue. A worker spins briefly after each slice before parking, and is only
// notified if it actually parked. The caller does its slice, then waits on a
// single completion counter: spins briefly, then parks.
//
// Errors. persist() returns only after every slice has finished (no worker
// touches the ranges any more), with the error of the lowest-numbered failed
// slice, naming the segment file and the byte range. Any error is final for
// the log (backend.h).
//
// Thread safety: persist() from one thread at a time (backend.h). The ranges'
// segments must stay mapped until persist() returns. The destructor stops and
// joins the workers; it must not run concurrently with persist().
#pragma once

#include <cstdint>
#include <memory>

#include "sync/backend.h"

namespace synclog::sync {

// Below 2x this many bytes a persist is not split: msync of a small range
// costs less than waking a thread (1-50 us).
inline constexpr uint64_t kMsyncPoolMinSlice = 64 * 1024;

// Starts `threads` workers. Errc::invalid_argument for threads == 0 or a
// min_slice_bytes of 0; Errc::unsupported if a thread cannot be started.
[[nodiscard]] Result<std::unique_ptr<Backend>> make_msync_pool_backend(
    uint32_t threads, uint64_t min_slice_bytes = kMsyncPoolMinSlice);

}  // namespace synclog::sync
