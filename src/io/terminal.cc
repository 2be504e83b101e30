#include "io/terminal.h"

#include <unistd.h>

namespace synclog::io {

bool is_terminal(int fd) { return ::isatty(fd) == 1; }

}  // namespace synclog::io
