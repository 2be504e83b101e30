// An eventfd: a counter the kernel makes readable when it is non-zero, so
// an epoll or io_uring event loop can wait for the log without a thread.
#pragma once

#include "synclog/error.h"

namespace synclog::io {

class EventFd {
 public:
  // Non-blocking and close-on-exec: the owner of the loop reads it, and a
  // read of a zero counter must not hang that loop.
  [[nodiscard]] static Result<EventFd> create();

  EventFd() = default;
  EventFd(EventFd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  EventFd& operator=(EventFd&& o) noexcept;
  ~EventFd();

  int fd() const { return fd_; }
  // Adds one to the counter, waking every poller.
  [[nodiscard]] Result<void> signal() const;
  // Reads the counter back to zero; returns what it held (0 if nothing).
  [[nodiscard]] Result<uint64_t> drain() const;

 private:
  int fd_ = -1;
};

}  // namespace synclog::io
