#include "io/uring.h"

#include <liburing.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "io/hook.h"

namespace synclog::io {

struct Uring::Ring {
  io_uring ring{};
  // Only a ring io_uring_queue_init set up may be torn down: on a zeroed
  // one, io_uring_queue_exit would close fd 0, which belongs to the
  // embedding process (its stdin, or whatever file it opened there).
  bool live = false;
  ~Ring() {
    if (live) io_uring_queue_exit(&ring);
  }
};

namespace {
std::unexpected<Error> uring_error(const std::string& what, int neg_errno) {
  return make_error(Errc::io_error, "io_uring " + what + ": " + std::strerror(-neg_errno),
                    -neg_errno);
}
}  // namespace

Uring::Uring(Uring&&) noexcept = default;
Uring& Uring::operator=(Uring&&) noexcept = default;
Uring::~Uring() = default;

Result<Uring> Uring::create(unsigned entries, unsigned file_slots, unsigned buffer_slots) {
  auto ring = std::make_unique<Ring>();
  int rc = io_uring_queue_init(entries, &ring->ring, 0);
  ring->live = rc == 0;
  if (rc < 0) {
    return make_error(Errc::unsupported,
                      std::string("io_uring is not available here (io_uring_setup: ") +
                          std::strerror(-rc) + "; see kernel.io_uring_disabled and seccomp policy)",
                      -rc);
  }
  Uring u;
  u.ring_ = std::move(ring);
  u.paths_.resize(file_slots);
  u.pending_.reserve(entries * 2);  // the completion queue's size: no allocation per request
  if ((rc = io_uring_register_files_sparse(&u.ring_->ring, file_slots)) < 0) {
    return make_error(Errc::unsupported,
                      std::string("io_uring cannot register files: ") + std::strerror(-rc), -rc);
  }
  if ((rc = io_uring_register_buffers_sparse(&u.ring_->ring, buffer_slots)) < 0) {
    return make_error(Errc::unsupported,
                      std::string("io_uring cannot register buffers: ") + std::strerror(-rc), -rc);
  }
  return u;
}

Result<void> Uring::set_file(unsigned slot, int fd, const std::filesystem::path& path) {
  paths_[slot] = path;
  int rc = io_uring_register_files_update(&ring_->ring, slot, &fd, 1);
  if (rc < 0) return uring_error("register file", rc);
  return {};
}

Result<void> Uring::set_buffer(unsigned slot, std::span<std::byte> memory) {
  iovec iov{memory.data(), memory.size()};
  __u64 tag = 0;
  int rc = io_uring_register_buffers_update_tag(&ring_->ring, slot, &iov, &tag, 1);
  if (rc < 0) return uring_error("register buffer", rc);
  return {};
}

bool Uring::queue_write(unsigned file_slot, int buffer_slot, const std::byte* data, uint32_t len,
                        uint64_t offset, int rw_flags, uint64_t user_data) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_->ring);
  if (sqe == nullptr) return false;
  const uint64_t tag = track(user_data);
  if (Hook* h = current_hook()) {
    const int err = h->before(Event{Op::direct_write, paths_[file_slot], offset, len, data});
    traced_.push_back(Traced{tag, file_slot, data, len, offset, false, -err});
    if (err != 0) {
      // The write is not done; its completion reports the injected error.
      io_uring_prep_nop(sqe);
      io_uring_sqe_set_data64(sqe, tag);
      ++queued_;
      return true;
    }
  }
  if (buffer_slot >= 0) {
    io_uring_prep_write_fixed(sqe, static_cast<int>(file_slot), data, len, offset, buffer_slot);
  } else {
    io_uring_prep_write(sqe, static_cast<int>(file_slot), data, len, offset);
  }
  sqe->flags |= IOSQE_FIXED_FILE;
  sqe->rw_flags = rw_flags;
  io_uring_sqe_set_data64(sqe, tag);
  ++queued_;
  return true;
}

bool Uring::queue_datasync(unsigned file_slot, uint64_t user_data) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_->ring);
  if (sqe == nullptr) return false;
  const uint64_t tag = track(user_data);
  if (Hook* h = current_hook()) {
    const int err = h->before(Event{Op::datasync, paths_[file_slot]});
    traced_.push_back(Traced{tag, file_slot, nullptr, 0, 0, true, -err});
    if (err != 0) {
      io_uring_prep_nop(sqe);
      io_uring_sqe_set_data64(sqe, tag);
      ++queued_;
      return true;
    }
  }
  io_uring_prep_fsync(sqe, static_cast<int>(file_slot), IORING_FSYNC_DATASYNC);
  sqe->flags |= IOSQE_FIXED_FILE;
  io_uring_sqe_set_data64(sqe, tag);
  ++queued_;
  return true;
}

uint64_t Uring::track(uint64_t user_data) {
  const uint64_t tag = next_tag_++;
  pending_.push_back(Pending{tag, user_data});
  return tag;
}

Result<unsigned> Uring::submit_and_collect(unsigned wait_for) {
  if (broken_) return std::unexpected(*broken_);
  auto pause = std::chrono::microseconds(10);
  for (int attempt = 0;; ++attempt) {
    int rc = 0;
    Hook* h = current_hook();
    do {
      rc = h != nullptr ? -h->before_submit() : 0;
      if (rc == 0) rc = io_uring_submit_and_wait(&ring_->ring, wait_for);
    } while (rc == -EINTR);
    if (rc >= 0) {
      // A signal may have cut the wait short: rc counts submissions, and
      // fewer than `wait_for` completions (even none) may be ready.
      const unsigned taken = std::min(static_cast<unsigned>(rc), queued_);
      queued_ -= taken;
      in_kernel_ += taken;
      return collect();
    }
    if (rc != -EAGAIN && rc != -EBUSY) {
      // What stays queued must never reach the kernel: the caller returns
      // an error and may reuse the buffers those writes name.
      broken_ = uring_error("submit", rc).error();
      return std::unexpected(*broken_);
    }
    // Short of resources (EAGAIN) or a full completion queue (EBUSY): the
    // queued operations stay queued. Hand over what has completed, which
    // frees both; with nothing to reap, pause and try again.
    if (in_kernel_ > 0) (void)io_uring_get_events(&ring_->ring);
    auto n = collect();
    if (!n || *n > 0) return n;
    if (attempt >= kBusyRetries) {
      return make_error(Errc::io_error,
                        "io_uring submit: " + std::string(std::strerror(-rc)) + " " +
                            std::to_string(attempt + 1) +
                            " times in a row with nothing completed to reap; giving up",
                        -rc);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

Result<unsigned> Uring::wait_and_collect() {
  io_uring_cqe* cqe = nullptr;
  int rc;
  do {
    rc = io_uring_wait_cqe(&ring_->ring, &cqe);
  } while (rc == -EINTR || rc == -EAGAIN);
  if (rc < 0) return uring_error("wait for completions", rc);
  return collect();
}

Result<unsigned> Uring::collect() {
  unsigned n = 0;
  unsigned seen = 0;
  unsigned head;
  io_uring_cqe* cqe;
  std::optional<uint64_t> stray;
  io_uring_for_each_cqe(&ring_->ring, head, cqe) {
    if (n == std::size(completions_)) break;
    ++seen;
    const uint64_t tag = io_uring_cqe_get_data64(cqe);
    auto it = std::find_if(pending_.begin(), pending_.end(),
                           [&](const Pending& p) { return p.tag == tag; });
    if (it == pending_.end()) {
      stray = tag;
      continue;
    }
    completions_[n] = Completion{it->user_data, cqe->res};
    *it = pending_.back();
    pending_.pop_back();
    if (!traced_.empty()) trace_completion(tag, completions_[n]);
    ++n;
  }
  io_uring_cq_advance(&ring_->ring, seen);
  in_kernel_ -= std::min(seen, in_kernel_);
  if (stray) {
    // Taking it for some request's completion would acknowledge a write
    // that may not have happened: the ring can no longer be trusted.
    broken_ = make_error(Errc::io_error, "io_uring completion with tag " + std::to_string(*stray) +
                                             ", which names no outstanding request")
                  .error();
    return std::unexpected(*broken_);
  }
  return n;
}

void Uring::trace_completion(uint64_t tag, Completion& c) {
  for (size_t i = 0; i < traced_.size(); ++i) {
    Traced t = traced_[i];
    if (t.tag != tag) continue;
    traced_.erase(traced_.begin() + static_cast<ptrdiff_t>(i));
    if (t.injected != 0) {
      c.result = t.injected;
    } else if (c.result >= 0) {
      if (Hook* h = current_hook()) {
        if (!t.datasync) {
          const Event e{Op::direct_write, paths_[t.slot], t.offset, t.len, t.data};
          c.result =
              static_cast<int32_t>(std::clamp<int64_t>(h->written(e, c.result), 0, c.result));
        }
        const auto len = t.datasync ? 0 : static_cast<uint64_t>(c.result);
        h->after(Event{t.datasync ? Op::datasync : Op::direct_write, paths_[t.slot], t.offset, len,
                       t.data});
      }
    }
    return;
  }
}

}  // namespace synclog::io
