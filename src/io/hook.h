// A test seam for fault injection and crash simulation. src/io reports each
// operation that moves bytes towards stable storage; a test's hook may fail
// one (it then returns the injected errno exactly as a failing syscall
// would, without doing it) or record it. Opening a file and reading one
// change nothing on disk: they go to a separate method, access(), which can
// only fail them, so hooks that model the disk never see them. Nothing is
// installed in production: the cost is one relaxed atomic load per
// operation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace synclog::io {

enum class Op : uint8_t {
  write,         // pwrite of `data` (buffered)
  direct_write,  // O_DIRECT write of `data` (io_uring or libaio)
  datasync,      // fdatasync (including io_uring's)
  fsync,         // fsync of a file
  dir_sync,      // fsync of a directory
  msync,         // msync of [offset, offset + length) of a shared mapping; `data` is that memory
  allocate,      // fallocate of [0, length)
  rename,        // rename of `path` to `*to` (durable once its directory is synced)
  remove,        // unlink of `path` (durable once its directory is synced)
  // Reported to Hook::access() only:
  open,  // open(2) of `path` with `open_flags`
  read,  // pread of [offset, offset + length) of `path`
};

struct Event {
  Op op;
  const std::filesystem::path& path;
  uint64_t offset = 0;
  uint64_t length = 0;
  const std::byte* data = nullptr;
  const std::filesystem::path* to = nullptr;  // rename: the destination
  int open_flags = 0;                         // open: the flags passed to open(2)
};

class Hook {
 public:
  virtual ~Hook() = default;
  // Before the operation; a non-zero errno fails it without doing it.
  virtual int before(const Event& event) {
    (void)event;
    return 0;
  }
  // After the operation succeeded.
  virtual void after(const Event& event) { (void)event; }
  // Before io_uring_enter submits queued operations (and waits for
  // completions). A non-zero errno makes that call fail with it without
  // being made: EAGAIN and EBUSY are what the kernel reports when it is
  // short of resources or its completion queue is full.
  virtual int before_submit() { return 0; }
  // The byte count a write returned (pwrite, or an io_uring or libaio
  // completion of a direct write). A test may report fewer, down to 0, to
  // exercise short and zero-byte writes; the bytes were written regardless.
  virtual int64_t written(const Event& event, int64_t bytes) {
    (void)event;
    return bytes;
  }
  // Before an open or a read (Op::open, Op::read); a non-zero errno fails it.
  virtual int access(const Event& event) {
    (void)event;
    return 0;
  }
};

// Installs `hook` process-wide (nullptr removes it). Install before opening
// a log and remove after closing it; the hook must be thread-safe.
void install_hook(Hook* hook);
Hook* current_hook();

// Runs `op` unless the hook fails it; returns 0 or the errno to report.
template <class F>
int hooked(const Event& event, F&& op) {
  Hook* h = current_hook();
  if (h != nullptr) {
    if (int err = h->before(event); err != 0) return err;
  }
  int err = op();
  if (err == 0 && h != nullptr) h->after(event);
  return err;
}

// For opens and reads: the errno the hook injects, or 0.
inline int access_fault(const Event& event) {
  Hook* h = current_hook();
  return h != nullptr ? h->access(event) : 0;
}

}  // namespace synclog::io
