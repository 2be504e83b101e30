#include "synclog/error.h"

#include <cstring>

namespace synclog {

const char* to_string(Errc code) noexcept {
  switch (code) {
    case Errc::invalid_config:
      return "invalid_config";
    case Errc::invalid_argument:
      return "invalid_argument";
    case Errc::io_error:
      return "io_error";
    case Errc::corruption:
      return "corruption";
    case Errc::bad_directory:
      return "bad_directory";
    case Errc::no_space:
      return "no_space";
    case Errc::failed:
      return "failed";
    case Errc::closed:
      return "closed";
    case Errc::unsupported:
      return "unsupported";
    case Errc::released:
      return "released";
    case Errc::timeout:
      return "timeout";
  }
  return "unknown";
}

std::string Error::describe() const {
  std::string s = std::string(to_string(code)) + ": " + message;
  return s;
}

}  // namespace synclog
