// Batch records (kind 6): several user records framed as one record, so that
// one checksum decides all of them. A torn or damaged batch fails as a whole,
// which is what makes a batch all or none in recovery (docs/format.md).
//
//   payload := count:u32 reserved:u32 entry{count}
//   entry   := len:u32 back:u32 data:byte[len] pad:byte[(8 - len % 8) % 8]
//
// `back` is the entry's distance from the batch record's header, so the
// position of an inner record (its entry's offset in the segment) leads to
// its batch without reading the segment before it. Pure format code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "segments/format.h"

namespace synclog::seg {

inline constexpr uint32_t kBatchHeader = 8;  // count, reserved
inline constexpr uint32_t kEntryHeader = 8;  // len, back
// One empty inner record.
inline constexpr uint32_t kBatchMinPayload = kBatchHeader + kEntryHeader;

constexpr uint64_t batch_entry_size(uint64_t len) {
  return kEntryHeader + ((len + kAlign - 1) & ~uint64_t{kAlign - 1});
}

// The pieces of one batch payload, ready for encode_record: the entry
// headers are held here, the records' bytes stay where the caller has them.
class BatchLayout {
 public:
  // `records` (empty ones too) must outlive pieces().
  explicit BatchLayout(std::span<const std::span<const std::byte>> records);
  // Payload bytes; may exceed kMaxPayload (the caller checks its limit).
  uint64_t payload_size() const { return size_; }
  std::span<const std::span<const std::byte>> pieces() const { return pieces_; }
  // Where record i's entry lies, from the batch record's header.
  uint32_t entry_offset(size_t i) const { return offsets_[i]; }

 private:
  std::vector<std::byte> heads_;
  std::vector<std::span<const std::byte>> pieces_;
  std::vector<uint32_t> offsets_;
  uint64_t size_ = 0;
};

// Why the payload of a batch record is malformed, or null.
const char* check_batch(std::span<const std::byte> payload);

// One record inside a batch.
struct InnerRecord {
  uint32_t offset = 0;  // the record's position: its entry's offset in the segment
                        // (in a packed batch, 16 + 8 i past the batch record)
  uint32_t framed = 0;  // to the next record's position (8 in a packed batch)
  std::span<const std::byte> data;
  uint32_t rel = 0;  // its entry's offset in the (plain) payload
};

// A compressed batch is "packed": its entries' offsets in the plain payload
// are not offsets in the segment, so inner record i gets position
// batch + 16 + 8 i instead. Those must lie inside the stored frame, so a
// batch is stored compressed only if its stored payload is longer than
// 8 bytes per record.
constexpr bool packed_fits(uint64_t stored_len, uint64_t count) { return stored_len > 8 * count; }

// Iteration over a valid batch, packed or not: its first inner record, and
// the one after `r`.
std::optional<InnerRecord> first_inner(const RecordView& batch);
std::optional<InnerRecord> next_inner(const RecordView& batch, const InnerRecord& r);

uint32_t batch_count(const RecordView& batch);
// The first entry of a valid batch record.
inline uint32_t first_entry(const RecordView& batch) {
  return batch.offset + kRecordHeaderSize + kBatchHeader;
}
// The inner record whose entry starts at `at` (first_entry(), then each
// inner record's offset + framed), or none at the batch's end. `batch` must
// have decoded as valid (check_batch passed) and not be packed.
std::optional<InnerRecord> inner_at(const RecordView& batch, uint32_t at);
// The last inner record's entry offset in a valid batch.
uint32_t last_entry(const RecordView& batch);
// Whether `at` is where an entry of the valid batch `batch` starts.
bool is_entry(const RecordView& batch, uint32_t at);
// For a position `at` that may be an inner record's: the offset of the batch
// record its entry header (8 bytes read at `at`) points back to, if plausible.
std::optional<uint32_t> batch_from_entry(std::span<const std::byte> entry_header, uint32_t at);

}  // namespace synclog::seg
