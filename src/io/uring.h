// A thin io_uring wrapper (liburing): one ring, fixed-file and fixed-buffer
// tables, write and fdatasync submissions, completion reaping. Errors come
// back as values; completion results are the kernel's (bytes or -errno).
//
// Any wait can return early: a signal cuts io_uring_enter's wait short and
// it returns the number submitted, not EINTR. So nothing here assumes a
// call reaped what it waited for: callers count their completions. Every
// request carries a tag of its own (never reused) in the kernel's
// user_data, and a completion is handed over only for a tag that is
// outstanding, translated back to the caller's user_data; any other
// completion breaks the ring. idle() tells a caller starting new work that
// no earlier request can still complete under it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "synclog/error.h"

namespace synclog::io {

class Uring {
 public:
  struct Completion {
    uint64_t user_data;
    int32_t result;
  };

  // Fails with Errc::unsupported if this kernel or its policy
  // (kernel.io_uring_disabled, seccomp) refuses io_uring.
  [[nodiscard]] static Result<Uring> create(unsigned entries, unsigned file_slots,
                                            unsigned buffer_slots);
  Uring(Uring&&) noexcept;
  Uring& operator=(Uring&&) noexcept;
  ~Uring();

  // Points a fixed-file slot at `fd` (-1 clears it); `path` names it.
  [[nodiscard]] Result<void> set_file(unsigned slot, int fd,
                                      const std::filesystem::path& path = {});
  // Points a fixed-buffer slot at memory (empty span clears it). The pages
  // are pinned until the slot is cleared.
  [[nodiscard]] Result<void> set_buffer(unsigned slot, std::span<std::byte> memory);

  // Queues a write of `len` bytes from `data` at file offset `offset`. The
  // file is a fixed slot, the buffer a fixed slot or -1. False if the
  // submission queue is full.
  bool queue_write(unsigned file_slot, int buffer_slot, const std::byte* data, uint32_t len,
                   uint64_t offset, int rw_flags, uint64_t user_data);
  bool queue_datasync(unsigned file_slot, uint64_t user_data);

  // Submits what is queued and waits until at least `wait_for` completions
  // are ready; hands each to `on_completion`, returns how many. EAGAIN and
  // EBUSY from io_uring_enter are transient: the completions already there
  // are handed over (reaping them is what frees the kernel's resources and
  // its completion queue), or the call is retried after a short pause, a
  // bounded number of times. After any other error the ring is broken:
  // later calls fail, and what was queued is never submitted.
  template <class F>
  [[nodiscard]] Result<unsigned> submit_and_reap(unsigned wait_for, F&& on_completion) {
    auto got = submit_and_collect(wait_for);
    if (!got) return got;
    for (unsigned i = 0; i < *got; ++i) on_completion(completions_[i]);
    return got;
  }

  // Operations submitted to the kernel whose completions are not reaped.
  unsigned in_kernel() const { return in_kernel_; }
  // Nothing queued, nothing in the kernel: no completion can arrive.
  bool idle() const { return pending_.empty(); }

  // Waits, submitting nothing, until every operation the kernel took has
  // completed, handing each completion to `on_completion`. For error paths:
  // the kernel reads the buffers of writes in flight, so nobody may return
  // and reuse them first. An error means the ring cannot even wait.
  template <class F>
  [[nodiscard]] Result<void> drain(F&& on_completion) {
    while (in_kernel_ > 0) {
      auto got = wait_and_collect();
      if (!got) return std::unexpected(got.error());
      for (unsigned i = 0; i < *got; ++i) on_completion(completions_[i]);
    }
    return {};
  }

  // How often a transient EAGAIN or EBUSY is retried with nothing to reap.
  static constexpr int kBusyRetries = 200;

 private:
  struct Ring;
  Uring() = default;
  Result<unsigned> submit_and_collect(unsigned wait_for);
  Result<unsigned> wait_and_collect();
  Result<unsigned> collect();
  // A tag for a new request whose caller knows it as `user_data`.
  uint64_t track(uint64_t user_data);

  // What the test hook (io/hook.h) sees: queued writes by user_data, and
  // results it injected. Only used while a hook is installed.
  struct Traced {
    uint64_t tag;
    unsigned slot;
    const std::byte* data;
    uint32_t len;
    uint64_t offset;
    bool datasync;
    int injected;  // -errno, or 0
  };
  void trace_completion(uint64_t tag, Completion& c);

  // Requests queued or in the kernel: their tag, and the caller's user_data.
  struct Pending {
    uint64_t tag;
    uint64_t user_data;
  };

  std::unique_ptr<Ring> ring_;
  std::vector<Pending> pending_;
  uint64_t next_tag_ = 1;
  unsigned queued_ = 0;     // prepared, not yet taken by the kernel
  unsigned in_kernel_ = 0;  // taken by the kernel, completion not reaped
  std::optional<Error> broken_;
  Completion completions_[256]{};
  std::vector<std::filesystem::path> paths_;
  std::vector<Traced> traced_;
};

}  // namespace synclog::io
