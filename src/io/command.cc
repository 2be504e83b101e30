#include "io/command.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace synclog::io {

std::string CommandExit::describe() const {
  if (signal != 0) return "killed by signal " + std::to_string(signal);
  return "exit status " + std::to_string(code);
}

Result<CommandExit> run_shell(const std::string& command) {
  // posix_spawn, not fork: the log's other threads may hold locks (malloc's
  // included) that a forked child would inherit held.
  char sh[] = "/bin/sh";
  char dash_c[] = "-c";
  std::string cmd = command;
  char* argv[] = {sh, dash_c, cmd.data(), nullptr};
  pid_t pid = 0;
  if (int err = posix_spawn(&pid, sh, nullptr, nullptr, argv, environ); err != 0) {
    return make_error(Errc::io_error,
                      "cannot start /bin/sh -c '" + command + "': " + std::strerror(err), err);
  }
  int status = 0;
  for (;;) {
    if (waitpid(pid, &status, 0) == pid) break;
    if (errno == EINTR) continue;
    const int err = errno;
    return make_error(Errc::io_error,
                      "cannot wait for /bin/sh -c '" + command + "': " + std::strerror(err), err);
  }
  CommandExit out;
  if (WIFSIGNALED(status)) {
    out.signal = WTERMSIG(status);
  } else {
    out.code = WEXITSTATUS(status);
  }
  return out;
}

}  // namespace synclog::io
