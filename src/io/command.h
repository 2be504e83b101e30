// Runs a shell command (an operator's archive_command) and waits for it.
#pragma once

#include <string>

#include "synclog/error.h"

namespace synclog::io {

// How a command ended: exit code 0..255, or the signal that killed it.
struct CommandExit {
  int code = 0;
  int signal = 0;  // nonzero: killed by this signal (code is then meaningless)
  bool ok() const { return signal == 0 && code == 0; }
  // "exit status 3" or "killed by signal 9", for error messages.
  std::string describe() const;
};

// Runs `command` with /bin/sh -c, inheriting the environment and standard
// streams, and waits for it. Errc::io_error only if it could not be started
// or waited for; how it ended is the value.
[[nodiscard]] Result<CommandExit> run_shell(const std::string& command);

}  // namespace synclog::io
