// Errors are values: every fallible call returns Result<T>, and a caller that
// drops one gets a compiler warning.
#pragma once

#include <expected>
#include <string>

#include "synclog/export.h"

namespace synclog {

enum class Errc {
  invalid_config,    // a Config key has a bad value or an impossible combination
  invalid_argument,  // e.g. an empty or oversized record
  io_error,          // a syscall failed; Error::sys_errno holds errno
  corruption,        // damaged log data found where recovery mode forbids it
  bad_directory,     // missing/unwritable directory, foreign file, bad segment header
  no_space,          // size limit or full disk: back-pressure timed out
  failed,            // the log failed stop: a sync error, or a segment not made (see message)
  closed,            // the log was closed
  unsupported,       // this machine cannot run the requested backend
  released,          // a position whose segment was already released
  timeout,           // a bounded wait ended without a result
};

SYNCLOG_API const char* to_string(Errc code) noexcept;

struct SYNCLOG_API Error {
  Errc code;
  std::string message;
  int sys_errno = 0;

  // "code: message (strerror)" for logs and test output.
  std::string describe() const;
};

template <class T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> make_error(Errc code, std::string message, int sys_errno = 0) {
  return std::unexpected<Error>(Error{code, std::move(message), sys_errno});
}

}  // namespace synclog
