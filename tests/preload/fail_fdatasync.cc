// LD_PRELOAD shim for fault injection from outside the library: the n-th
// fdatasync() (SYNCLOG_FAIL_FDATASYNC_AT=n) and every later one fail with
// EIO, as the kernel reports for a dying disk.
#include <dlfcn.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>

namespace {
std::atomic<long> g_calls{0};
}

extern "C" int fdatasync(int fd) {
  using Fn = int (*)(int);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "fdatasync"));
  const char* at = std::getenv("SYNCLOG_FAIL_FDATASYNC_AT");
  const long n = at ? std::atol(at) : 0;
  if (n > 0 && g_calls.fetch_add(1) + 1 >= n) {
    errno = EIO;
    return -1;
  }
  return real(fd);
}
