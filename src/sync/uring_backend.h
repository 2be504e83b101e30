// uring: O_DIRECT writes of whole aligned blocks from the segment image,
// through io_uring with registered files and buffers, several in flight.
// Durability per write with RWF_DSYNC (default: on pre-written blocks it
// completes without a journal commit), or plain writes followed by one
// fdatasync per file (direct_sync=fdatasync).
#pragma once

#include <vector>

#include "io/uring.h"
#include "sync/backend.h"

namespace synclog::sync {

[[nodiscard]] Result<std::unique_ptr<Backend>> make_uring_backend(const Config& config,
                                                                  uint32_t block_size);

class UringBackend final : public Backend {
 public:
  UringBackend(io::Uring ring, uint32_t block_size, unsigned depth, bool dsync)
      : ring_(std::move(ring)), block_(block_size), depth_(depth), dsync_(dsync) {}

  const char* name() const override { return "uring"; }
  [[nodiscard]] Result<void> persist(std::span<const Range> ranges) override;
  void retire(seg::Segment& segment) override;
  [[nodiscard]] Result<void> probe(const io::File& file) override;

 private:
  static constexpr unsigned kSlots = 4;
  struct Slot {
    seg::Segment* segment = nullptr;
    bool fixed_buffer = false;
  };
  struct Write {
    unsigned slot;
    int buffer;  // fixed-buffer slot or -1
    const std::byte* data;
    uint64_t offset;
    uint32_t len;
    uint16_t zero = 0;       // completions in a row that wrote nothing
    uint16_t transient = 0;  // EAGAIN, EINTR or ECANCELED completions in a row
    bool in_flight = false;  // queued, completion not yet reaped
  };
  // A write that keeps completing with 0 bytes fails after this many
  // retries; one that keeps completing EAGAIN (or EINTR, ECANCELED) after
  // kMaxTransient.
  static constexpr int kMaxZeroWrites = 3;
  static constexpr int kMaxTransient = 1000;

  // A slot for the segment, re-pointing one not in `busy` if needed.
  [[nodiscard]] Result<unsigned> slot_for(seg::Segment* segment, const std::vector<unsigned>& busy);
  [[nodiscard]] Result<void> run(std::vector<Write>& writes);
  [[nodiscard]] Result<void> datasync(const std::vector<unsigned>& slots);
  // `error`, once nothing is in flight any more.
  std::unexpected<Error> drained(Error error);
  // One write (or, with data == nullptr, one datasync) on slot 0; the
  // completion's result.
  [[nodiscard]] Result<int> one(const std::byte* data, int rw_flags);

  io::Uring ring_;
  const uint32_t block_;
  const unsigned depth_;
  const bool dsync_;
  Slot slots_[kSlots];
  unsigned victim_ = 0;
  std::vector<Write> writes_;  // reused across syncs
  std::vector<size_t> retry_;
};

}  // namespace synclog::sync
