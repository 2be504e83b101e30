// Linux kernel AIO (libaio) for O_DIRECT writes. One context per backend,
// used by one thread at a time. Failures come back as Errors with sys_errno
// set, so the caller can tell a retryable EAGAIN from a real failure and
// name its own file in the message. Writes are reported to the test hook
// (io/hook.h) as Op::direct_write; a write the hook fails never reaches the
// kernel and completes with the injected -errno.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>

#include "synclog/error.h"

namespace synclog::io {

struct AioWrite {
  int fd = -1;
  const std::filesystem::path* path = nullptr;  // names the file to the hook
  // Must stay valid and unchanged until this write's completion is reaped.
  const std::byte* buf = nullptr;
  size_t len = 0;
  uint64_t offset = 0;
  bool dsync = false;  // RWF_DSYNC: the completion means the bytes are durable
  uint64_t tag = 0;    // handed back in the completion
};

struct AioCompletion {
  uint64_t tag;
  int64_t res;  // bytes written (possibly short), or -errno
};

class AioContext {
 public:
  AioContext();
  AioContext(AioContext&&) noexcept;
  AioContext& operator=(AioContext&&) noexcept;
  // Keeps the kernel context for the next create() (io_destroy is slow), or
  // io_destroy, which waits for writes still in flight.
  ~AioContext();

  // io_setup(depth), or an idle context of that depth. sys_errno says why it failed: ENOSYS (no AIO
  // in this kernel), EAGAIN (fs.aio-max-nr reached), EINVAL (depth out of range).
  [[nodiscard]] static Result<AioContext> create(unsigned depth);

  unsigned depth() const;
  unsigned in_flight() const;

  // Submits a prefix of `writes`, never more than depth() - in_flight();
  // returns how many the kernel took. An error is about writes[0]: EBADF,
  // EINVAL (misaligned, or RWF_DSYNC unknown to the kernel), EAGAIN (no
  // kernel resources right now: reap, then retry).
  [[nodiscard]] Result<size_t> submit(std::span<const AioWrite> writes);
  // Waits for at least `min` (<= in_flight()) completions. The span stays
  // valid until the next call.
  [[nodiscard]] Result<std::span<const AioCompletion>> reap(size_t min);
  // For error paths: returns only when no write is in flight any more (the
  // kernel reads their buffers), discarding their results. If the context
  // cannot wait, io_destroy cancels them or waits for them, and the context
  // is unusable after: later calls fail.
  void settle();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace synclog::io
