// Reads a child process's output pipe line by line, for tests that drive an
// example binary through its stdout.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <optional>
#include <string>

namespace synclog::test {

class PipeLines {
 public:
  // The next line (without its newline); nullopt at the end of output or
  // when nothing arrives for `timeout_ms`.
  std::optional<std::string> next(int fd, int timeout_ms) {
    for (;;) {
      if (auto nl = buf_.find('\n'); nl != std::string::npos) {
        std::string l = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return l;
      }
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, timeout_ms) <= 0) return std::nullopt;
      char chunk[4096];
      const ssize_t n = ::read(fd, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  std::string buf_;
};

}  // namespace synclog::test
