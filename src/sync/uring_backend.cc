#include "sync/uring_backend.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "io/mapping.h"

namespace synclog::sync {
namespace {

// Large enough to stream, small enough that several are in flight.
constexpr uint64_t kMaxWrite = 1 << 20;

std::unexpected<Error> write_error(const seg::Segment& s, uint64_t offset, int neg) {
  return make_error(Errc::io_error,
                    "io_uring write to " + s.path().string() + " at offset " +
                        std::to_string(offset) + " failed: " + std::strerror(-neg),
                    -neg);
}

}  // namespace

Result<std::unique_ptr<Backend>> make_uring_backend(const Config& config, uint32_t block_size) {
  // Room for a full queue of writes plus one fdatasync per slot.
  auto ring = io::Uring::create(std::max(config.queue_depth, 8u) * 2, 4, 4);
  if (!ring) return std::unexpected(ring.error());
  return std::make_unique<UringBackend>(std::move(*ring), block_size, config.queue_depth,
                                        config.direct_sync == DirectSync::dsync);
}

Result<int> UringBackend::one(const std::byte* data, int rw_flags) {
  // EAGAIN, EINTR and ECANCELED are retried, a bounded number of times.
  // ECANCELED: the kernel could not start a worker thread for the request
  // (a signal was pending on the submitter while it tried), so the request
  // never ran.
  for (int attempt = 0;; ++attempt) {
    const bool queued = data != nullptr
                            ? ring_.queue_write(0, -1, data, block_, block_, rw_flags, 0)
                            : ring_.queue_datasync(0, 0);
    if (!queued) return make_error(Errc::io_error, "io_uring queue full");
    // A wait cut short by a signal reaps nothing: wait again until this
    // request's own completion is in hand. Returning earlier would leave it
    // in the kernel, writing from a buffer the caller is about to unmap.
    std::optional<int> result;
    while (!result) {
      auto reaped =
          ring_.submit_and_reap(1, [&](const io::Uring::Completion& c) { result = c.result; });
      if (!reaped) return drained(reaped.error());
    }
    const bool transient = *result == -EAGAIN || *result == -EINTR || *result == -ECANCELED;
    if (!transient || attempt == 100) return *result;
  }
}

Result<void> UringBackend::probe(const io::File& file) {
  auto zeros = io::Mapping::map_anonymous(std::max<uint64_t>(block_, io::page_size()));
  if (!zeros) return std::unexpected(zeros.error());
  if (auto r = ring_.set_file(0, file.fd(), file.path()); !r) return r;
  const std::string write =
      "a direct write of " + std::to_string(block_) + " bytes at offset " + std::to_string(block_);
  auto check = [&]() -> Result<void> {
    auto plain = one(zeros->bytes().data(), 0);
    if (!plain) return std::unexpected(plain.error());
    if (*plain < 0) {
      return probe_error("uring", write, file, -*plain,
                         "the direct I/O alignment in use, " + std::to_string(block_) +
                             " bytes, is below what this filesystem and device need");
    }
    auto durable = dsync_ ? one(zeros->bytes().data(), RWF_DSYNC) : one(nullptr, 0);
    if (!durable) return std::unexpected(durable.error());
    if (*durable < 0) {
      return dsync_ ? probe_error("uring", write + " with RWF_DSYNC", file, -*durable,
                                  "this kernel refuses RWF_DSYNC on io_uring writes: use "
                                  "direct_sync=fdatasync")
                    : probe_error("uring", "IORING_OP_FSYNC (datasync)", file, -*durable,
                                  "this kernel refuses io_uring fdatasync");
    }
    return {};
  };
  auto r = check();
  (void)ring_.set_file(0, -1);
  return r;
}

Result<unsigned> UringBackend::slot_for(seg::Segment* segment, const std::vector<unsigned>& busy) {
  for (unsigned i = 0; i < kSlots; ++i) {
    if (slots_[i].segment == segment) return i;
  }
  // Never re-point a slot that queued writes still name.
  unsigned i = victim_;
  while (std::find(busy.begin(), busy.end(), i) != busy.end()) i = (i + 1) % kSlots;
  victim_ = (i + 1) % kSlots;
  if (slots_[i].segment != nullptr) retire(*slots_[i].segment);
  if (auto r = ring_.set_file(i, segment->file().fd(), segment->path()); !r) {
    return std::unexpected(r.error());
  }
  // Pinning the image lets the kernel skip the per-write page lookups; if
  // the pin is refused (memlock), plain writes work the same.
  slots_[i] = Slot{segment, ring_.set_buffer(i, segment->image()).has_value()};
  return i;
}

void UringBackend::retire(seg::Segment& segment) {
  for (Slot& s : slots_) {
    if (s.segment != &segment) continue;
    const unsigned i = static_cast<unsigned>(&s - slots_);
    (void)ring_.set_file(i, -1);
    if (s.fixed_buffer) (void)ring_.set_buffer(i, {});
    s = Slot{};
  }
}

Result<void> UringBackend::persist(std::span<const Range> ranges) {
  if (!ring_.idle()) {
    // A completion still due from an earlier call would be taken for one
    // of this sync's writes.
    return make_error(Errc::io_error, "io_uring: " + std::to_string(ring_.in_kernel()) +
                                          " requests of an earlier call are still in flight");
  }
  writes_.clear();
  std::vector<unsigned> used;
  auto flush = [&]() -> Result<void> {
    if (auto r = run(writes_); !r) return r;
    if (!dsync_) {
      if (auto r = datasync(used); !r) return r;
    }
    writes_.clear();
    used.clear();
    return {};
  };
  for (const Range& r : ranges) {
    // One sync can span more segments than there are slots (periodic mode,
    // small segments): write out what is queued before slots are re-pointed.
    const bool known = std::any_of(std::begin(slots_), std::end(slots_),
                                   [&](const Slot& s) { return s.segment == r.segment; });
    if (!known && used.size() == kSlots) {
      if (auto f = flush(); !f) return f;
    }
    auto slot = slot_for(r.segment, used);
    if (!slot) return std::unexpected(slot.error());
    if (std::find(used.begin(), used.end(), *slot) == used.end()) used.push_back(*slot);
    // Whole blocks only: the kernel may accept a misaligned direct write on
    // one filesystem and fail or tear it on another.
    const uint64_t from = r.from / block_ * block_;
    const uint64_t to =
        std::min<uint64_t>((r.to + block_ - 1) / block_ * block_, r.segment->size());
    const int buffer = slots_[*slot].fixed_buffer ? static_cast<int>(*slot) : -1;
    for (uint64_t off = from; off < to; off += kMaxWrite) {
      const uint32_t len = static_cast<uint32_t>(std::min(kMaxWrite, to - off));
      writes_.push_back(Write{*slot, buffer, r.segment->image().data() + off, off, len});
    }
  }
  return flush();
}

Result<void> UringBackend::run(std::vector<Write>& writes) {
  const int flags = dsync_ ? RWF_DSYNC : 0;
  size_t next = 0;
  size_t done = 0;
  unsigned inflight = 0;
  retry_.clear();
  std::optional<Error> failure;
  auto queue = [&](size_t i) {
    Write& w = writes[i];
    w.in_flight = ring_.queue_write(w.slot, w.buffer, w.data, w.len, w.offset, flags, i);
    return w.in_flight;
  };
  while (done < writes.size()) {
    while (!failure && inflight < depth_ && (!retry_.empty() || next < writes.size())) {
      const size_t i = retry_.empty() ? next : retry_.back();
      if (!queue(i)) break;
      retry_.empty() ? (void)++next : retry_.pop_back();
      ++inflight;
    }
    if (inflight == 0) break;  // only after a failure: nothing more is queued
    // Never return with writes in flight: their completions would be taken
    // for the next sync's.
    auto reaped = ring_.submit_and_reap(1, [&](const io::Uring::Completion& c) {
      --inflight;
      Write& w = writes[c.user_data];
      if (!w.in_flight) {
        // The ring only hands over completions of outstanding requests;
        // this would be a second one for the same write.
        if (!failure) {
          failure =
              make_error(Errc::io_error, "io_uring: a second completion for the write at offset " +
                                             std::to_string(w.offset))
                  .error();
        }
        return;
      }
      w.in_flight = false;
      const bool transient = c.result == -EAGAIN || c.result == -EINTR || c.result == -ECANCELED;
      w.transient = transient ? w.transient + 1 : 0;
      if (transient && w.transient > kMaxTransient) {
        if (!failure) failure = write_error(*slots_[w.slot].segment, w.offset, c.result).error();
        ++done;
      } else if (transient) {
        retry_.push_back(c.user_data);
      } else if (c.result == 0) {
        // No progress and no error: retrying may never end.
        if (++w.zero > kMaxZeroWrites) {
          if (!failure) {
            failure = make_error(Errc::io_error,
                                 "io_uring write of " + std::to_string(w.len) + " bytes to " +
                                     slots_[w.slot].segment->path().string() + " at offset " +
                                     std::to_string(w.offset) + " completed with 0 bytes " +
                                     std::to_string(w.zero) + " times in a row",
                                 EIO)
                          .error();
          }
          ++done;
        } else {
          retry_.push_back(c.user_data);
        }
      } else if (c.result < 0) {
        if (!failure) failure = write_error(*slots_[w.slot].segment, w.offset, c.result).error();
        ++done;
      } else if (static_cast<uint32_t>(c.result) < w.len) {
        w.zero = 0;
        // A short write: the rest goes again, still block-aligned.
        w.data += c.result;
        w.offset += static_cast<uint32_t>(c.result);
        w.len -= static_cast<uint32_t>(c.result);
        if (w.offset % block_ != 0 && !failure) {
          failure = make_error(Errc::io_error,
                               "io_uring short direct write ended off a block "
                               "boundary at " +
                                   std::to_string(w.offset))
                        .error();
          ++done;
        } else {
          retry_.push_back(c.user_data);
        }
      } else {
        ++done;
      }
    });
    if (!reaped) return drained(reaped.error());
  }
  if (failure) return std::unexpected(*failure);
  return {};
}

std::unexpected<Error> UringBackend::drained(Error error) {
  // Writes the kernel took still read the segment image: wait for them
  // before the caller may move on. Their results no longer matter.
  if (auto d = ring_.drain([](const io::Uring::Completion&) {}); !d) {
    error.message += "; and then " + d.error().message + " with " +
                     std::to_string(ring_.in_kernel()) + " writes still in flight";
  }
  return std::unexpected(std::move(error));
}

Result<void> UringBackend::datasync(const std::vector<unsigned>& slots) {
  std::optional<Error> failure;
  std::vector<unsigned> todo(slots.rbegin(), slots.rend());
  std::vector<uint16_t> transient(kSlots, 0);
  unsigned pending = 0;
  while (pending > 0 || (!todo.empty() && !failure)) {
    // Those already queued still go, and are waited for, before the error.
    while (!todo.empty() && !failure) {
      if (!ring_.queue_datasync(todo.back(), todo.back())) {
        if (pending > 0) break;  // room comes back as completions are reaped
        failure = make_error(Errc::io_error, "io_uring submission queue full").error();
        break;
      }
      todo.pop_back();
      ++pending;
    }
    if (pending == 0) break;
    auto reaped = ring_.submit_and_reap(1, [&](const io::Uring::Completion& c) {
      --pending;
      const auto s = static_cast<unsigned>(c.user_data);
      // EINTR or ECANCELED (no kernel worker could be started while a
      // signal was pending): the fdatasync never ran, so no writeback error
      // was reported and consumed; it goes again, a bounded number of times.
      const bool again = c.result == -EINTR || c.result == -ECANCELED || c.result == -EAGAIN;
      if (again && ++transient[s] <= kMaxTransient) {
        todo.push_back(s);
        return;
      }
      if (c.result < 0 && !failure) {
        failure = make_error(Errc::io_error,
                             "io_uring fdatasync of " + slots_[s].segment->path().string() +
                                 " failed: " + std::strerror(-c.result),
                             -c.result)
                      .error();
      }
    });
    if (!reaped) return drained(reaped.error());
  }
  if (failure) return std::unexpected(*failure);
  return {};
}

}  // namespace synclog::sync
