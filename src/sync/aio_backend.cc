#include "sync/aio_backend.h"

#include <algorithm>
#include <cerrno>
#include <optional>
#include <vector>

#include "io/aio.h"
#include "io/mapping.h"

namespace synclog::sync {
namespace {

// Large enough to stream, small enough that several are in flight.
constexpr uint64_t kMaxWrite = 1 << 20;
// A write that keeps coming back EAGAIN, EINTR or short without progress
// fails rather than spinning forever.
constexpr int kMaxStalls = 1000;
// A write that completes with 0 bytes and no error made no progress and
// says nothing about why: a few retries, then it fails.
constexpr int kMaxZeroWrites = 3;

struct Write {
  seg::Segment* segment;
  uint64_t offset;
  uint64_t len;
  int stalls = 0;
  int zero = 0;  // completions in a row that wrote nothing
};

std::unexpected<Error> write_error(const Write& w, int err) {
  // sys_error keeps ENOSPC as Errc::no_space: a full disk is back-pressure (G5).
  return io::sys_error("aio write of " + std::to_string(w.len) + " bytes at offset " +
                           std::to_string(w.offset) + " to",
                       w.segment->path(), err);
}

class AioBackend final : public Backend {
 public:
  AioBackend(io::AioContext aio, uint32_t block_size, bool use_fdatasync)
      : aio_(std::move(aio)), block_(block_size), fdatasync_(use_fdatasync) {}
  const char* name() const override { return "aio"; }
  [[nodiscard]] Result<void> persist(std::span<const Range> ranges) override;
  [[nodiscard]] Result<void> probe(const io::File& file) override;

 private:
  // One write of a block at offset block_; its result (bytes or -errno).
  [[nodiscard]] Result<int64_t> one(const io::File& file, const std::byte* data, bool dsync);
  [[nodiscard]] Result<void> plan(std::span<const Range> ranges);
  [[nodiscard]] Result<void> run();

  io::AioContext aio_;
  const uint64_t block_;
  const bool fdatasync_;
  // Reused across syncs. The index into writes_ is the completion tag.
  std::vector<Write> writes_;
  std::vector<uint32_t> ready_;  // writes to (re)submit, in order
  std::vector<io::AioWrite> batch_;
};

Result<void> AioBackend::plan(std::span<const Range> ranges) {
  writes_.clear();
  for (const Range& r : ranges) {
    seg::Segment* s = r.segment;
    if (r.from >= r.to) continue;
    if (r.to > s->size() || s->image().size() < s->size() || !s->file().is_open()) {
      return make_error(Errc::invalid_argument,
                        "aio: range [" + std::to_string(r.from) + ", " + std::to_string(r.to) +
                            ") of " + s->path().string() +
                            " is past the segment or the segment is not open");
    }
    // O_DIRECT needs whole blocks; some filesystems would accept less and
    // silently fall back, so alignment is enforced here, not left to the kernel.
    uint64_t from = r.from & ~(block_ - 1);
    const uint64_t to = std::min((r.to + block_ - 1) & ~(block_ - 1), s->size());
    if (to % block_ != 0) {
      return make_error(Errc::invalid_argument, "aio: segment " + s->path().string() + " size " +
                                                    std::to_string(s->size()) +
                                                    " is not a multiple of the block size " +
                                                    std::to_string(block_));
    }
    // Consecutive ranges share their boundary block: write it once.
    if (!writes_.empty() && writes_.back().segment == s) {
      const Write& last = writes_.back();
      if (from >= last.offset && from < last.offset + last.len) from = last.offset + last.len;
    }
    const uint64_t most = std::max<uint64_t>(kMaxWrite, block_);
    for (uint64_t at = from; at < to; at += most)
      writes_.push_back({s, at, std::min(most, to - at)});
  }
  return {};
}

Result<void> AioBackend::run() {
  ready_.clear();
  for (uint32_t i = 0; i < writes_.size(); ++i) ready_.push_back(i);
  size_t head = 0;
  std::optional<Error> failure;
  // After a failure, keep reaping: the kernel still reads the image for
  // writes in flight, so we must not return before they are done.
  while (aio_.in_flight() > 0 || (!failure && head < ready_.size())) {
    if (!failure && head < ready_.size()) {
      batch_.clear();
      for (size_t i = head; i < ready_.size() && batch_.size() < aio_.depth() - aio_.in_flight();
           ++i) {
        const Write& w = writes_[ready_[i]];
        batch_.push_back({w.segment->file().fd(), &w.segment->path(),
                          w.segment->image().data() + w.offset, w.len, w.offset, !fdatasync_,
                          ready_[i]});
      }
      auto n = aio_.submit(batch_);
      if (n) {
        head += *n;
      } else if (Write& w = writes_[ready_[head]];
                 (n.error().sys_errno != EAGAIN && n.error().sys_errno != EINTR) ||
                 ++w.stalls > kMaxStalls) {
        failure = write_error(w, n.error().sys_errno).error();
      }
    }
    if (aio_.in_flight() == 0) continue;
    auto done = aio_.reap(1);
    if (!done) {
      // The context itself is broken; the kernel may still read the image.
      aio_.settle();
      return std::unexpected(done.error());
    }
    for (const io::AioCompletion& c : *done) {
      Write& w = writes_[c.tag];
      if (c.res >= static_cast<int64_t>(w.len)) continue;  // durable (or written, for fdatasync)
      if (c.res < 0 && c.res != -EAGAIN && c.res != -EINTR) {
        if (!failure) failure = write_error(w, static_cast<int>(-c.res)).error();
        continue;
      }
      if (c.res == 0 && ++w.zero > kMaxZeroWrites) {
        if (!failure) {
          failure = make_error(Errc::io_error,
                               "aio write of " + std::to_string(w.len) + " bytes at offset " +
                                   std::to_string(w.offset) + " to " + w.segment->path().string() +
                                   " completed with 0 bytes " + std::to_string(w.zero) +
                                   " times in a row",
                               EIO)
                        .error();
        }
        continue;
      }
      if (c.res > 0) w.zero = 0;
      // Resubmit the rest from the last whole block, so it stays aligned.
      const uint64_t advance = c.res > 0 ? static_cast<uint64_t>(c.res) & ~(block_ - 1) : 0;
      w.offset += advance;
      w.len -= advance;
      w.stalls = advance > 0 ? 0 : w.stalls + 1;
      if (w.stalls > kMaxStalls && !failure)
        failure = write_error(w, c.res < 0 ? -c.res : EIO).error();
      ready_.push_back(c.tag);
    }
  }
  if (failure) return std::unexpected(*failure);
  return {};
}

Result<void> AioBackend::persist(std::span<const Range> ranges) {
  if (auto p = plan(ranges); !p) return p;
  if (auto r = run(); !r) return r;
  if (!fdatasync_) return {};
  for (size_t i = 0; i < writes_.size(); ++i) {
    // A segment's writes are consecutive when its ranges are: one fdatasync each.
    if (i > 0 && writes_[i].segment == writes_[i - 1].segment) continue;
    if (auto s = writes_[i].segment->file().datasync(); !s) return s;
  }
  return {};
}

Result<int64_t> AioBackend::one(const io::File& file, const std::byte* data, bool dsync) {
  const io::AioWrite w{file.fd(), &file.path(), data, block_, block_, dsync, 0};
  // EAGAIN and EINTR are retried, a bounded number of times.
  for (int attempt = 0;; ++attempt) {
    int64_t res = 0;
    auto n = aio_.submit(std::span(&w, 1));
    if (!n) {
      res = -n.error().sys_errno;
    } else if (*n == 1) {
      auto done = aio_.reap(1);
      if (!done) return std::unexpected(done.error());
      res = (*done)[0].res;
    } else {
      res = -EAGAIN;
    }
    if ((res != -EAGAIN && res != -EINTR) || attempt == kMaxStalls) return res;
  }
}

Result<void> AioBackend::probe(const io::File& file) {
  auto zeros = io::Mapping::map_anonymous(std::max<uint64_t>(block_, io::page_size()));
  if (!zeros) return std::unexpected(zeros.error());
  const std::string write =
      "a direct write of " + std::to_string(block_) + " bytes at offset " + std::to_string(block_);
  auto plain = one(file, zeros->bytes().data(), false);
  if (!plain) return std::unexpected(plain.error());
  if (*plain < 0) {
    return probe_error("aio", write, file, static_cast<int>(-*plain),
                       "the direct I/O alignment in use, " + std::to_string(block_) +
                           " bytes, is below what this filesystem and device need");
  }
  if (fdatasync_) return file.datasync();
  auto durable = one(file, zeros->bytes().data(), true);
  if (!durable) return std::unexpected(durable.error());
  if (*durable < 0) {
    return probe_error("aio", write + " with RWF_DSYNC", file, static_cast<int>(-*durable),
                       "this kernel refuses RWF_DSYNC in aio_rw_flags: use direct_sync=fdatasync");
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<Backend>> make_aio_backend(const Config& config, uint32_t block_size) {
  // Anything but an explicit dsync (auto not yet resolved) takes the safe way.
  return make_aio_backend(config, block_size, config.direct_sync != DirectSync::dsync);
}

Result<std::unique_ptr<Backend>> make_aio_backend(const Config& config, uint32_t block_size,
                                                  bool use_fdatasync) {
  if (block_size < 512 || (block_size & (block_size - 1)) != 0) {
    return make_error(Errc::invalid_argument, "aio backend: block size " +
                                                  std::to_string(block_size) +
                                                  " is not a power of two of at least 512");
  }
  auto aio = io::AioContext::create(std::max(config.queue_depth, 1u));
  if (!aio) {
    return make_error(Errc::unsupported,
                      "backend 'aio' cannot run here: " + aio.error().message +
                          " (kernel AIO missing, or fs.aio-max-nr exhausted: lower queue_depth)",
                      aio.error().sys_errno);
  }
  return std::make_unique<AioBackend>(std::move(*aio), block_size, use_fdatasync);
}

}  // namespace synclog::sync
