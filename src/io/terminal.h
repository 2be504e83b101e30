// Whether a file descriptor is a terminal: tools refuse to write binary
// output there (it can reprogram the terminal).
#pragma once

namespace synclog::io {

bool is_terminal(int fd);

}  // namespace synclog::io
