#include "io/event_fd.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace synclog::io {

Result<EventFd> EventFd::create() {
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    return make_error(Errc::io_error, std::string("eventfd: ") + std::strerror(e), e);
  }
  EventFd out;
  out.fd_ = fd;
  return out;
}

EventFd& EventFd::operator=(EventFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

EventFd::~EventFd() {
  if (fd_ >= 0) ::close(fd_);
}

Result<void> EventFd::signal() const {
  const uint64_t one = 1;
  for (;;) {
    if (::write(fd_, &one, sizeof one) == sizeof one) return {};
    const int e = errno;
    if (e == EINTR) continue;
    // EAGAIN means the counter is at its maximum: it is readable already.
    if (e == EAGAIN) return {};
    return make_error(Errc::io_error,
                      "write to the durability eventfd " + std::to_string(fd_) + ": " +
                          std::strerror(e) + " (was the descriptor from durable_fd() closed?)",
                      e);
  }
}

Result<uint64_t> EventFd::drain() const {
  uint64_t value = 0;
  for (;;) {
    if (::read(fd_, &value, sizeof value) == sizeof value) return value;
    const int e = errno;
    if (e == EINTR) continue;
    if (e == EAGAIN) return 0;
    return make_error(
        Errc::io_error,
        "read of the durability eventfd " + std::to_string(fd_) + ": " + std::strerror(e), e);
  }
}

}  // namespace synclog::io
