// The on-disk format (docs/format.md is the reference; keep them in step).
// Pure encoding and decoding over byte spans: no syscalls here.
//
// A segment file is a 64-byte header followed by 8-byte-aligned records.
// Every record checksum covers the segment id and the record's offset, so a
// record is valid only where it was written (F2).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "synclog/error.h"
#include "synclog/position.h"

namespace synclog::seg {

static_assert(std::endian::native == std::endian::little, "the format is little-endian");

inline constexpr uint64_t kMagic = 0x1a474f4c434e5953ull;  // "SYNCLOG\x1a"
// Version 2 added the loss record, version 3 the batch record, version 4
// empty data records (len 0, alone or inside a batch), version 5 the
// fragment kinds. Older files are read as they are; version 6 added the
// wall-clock time in sync markers and transformed records (record flags and
// the header's encryption fields), version 7 the key check value of
// encrypted segments (offset 56). Every header this build writes says 7, so
// a build that would misread a new record refuses the directory instead.
inline constexpr uint32_t kVersion = 7;
// The first version whose sync markers carry the time their sync began.
inline constexpr uint32_t kFirstTimedMarkerVersion = 6;
inline constexpr uint32_t kFirstTransformVersion = 6;
inline constexpr uint32_t kFirstKeyCheckVersion = 7;
// Header flags (offset 12): records of the segment may be encrypted; the
// key id is at offset 36 and the nonce salt at offset 48.
inline constexpr uint32_t kHeaderEncrypted = 1;
inline constexpr uint32_t kOldestReadableVersion = 1;
inline constexpr uint32_t kHeaderSize = 64;
inline constexpr uint32_t kRecordHeaderSize = 8;
inline constexpr uint32_t kAlign = 8;
inline constexpr uint32_t kMaxPayload = (1u << 24) - 1;
inline constexpr uint32_t kPositionPayload = 8;  // sync and session records carry one Position
// A sync marker from version 6 on: the Position, then the unix time in ns
// when its sync began, then the tail=pad padding.
inline constexpr uint32_t kMarkerPayload = kPositionPayload + 8;

enum class Kind : uint8_t {
  none = 0,     // never written: all-zero header
  data = 1,     // a user record, 0 bytes or more
  sync = 2,     // sync marker: payload = durable position before this sync began,
                // the wall-clock time it began (version 6), then zero padding
                // that ends the sync on a block boundary (tail=pad)
  end = 3,      // end of segment: replay continues in the next segment
  session = 4,  // first record of a session: payload = where the previous session ended
  loss = 5,     // after a session record: a loss that recovery accepted (LossRecord)
  batch = 6,    // several user records under one checksum: all or none (batch.h)
  // A record too large for one data record, in consecutive fragments: the
  // first carries the record's total length (u64) before its bytes; only
  // end records (and segment switches) lie between fragments (fragments.h).
  first = 7,
  middle = 8,
  last = 9,
};
inline constexpr uint32_t kFirstFixedPayload = 8;  // the total length before the bytes

// The kinds that carry user bytes: the only ones a transform may apply to,
// and in an encrypted segment the ones that must be encrypted.
constexpr bool carries_user_bytes(Kind k) {
  return k == Kind::data || k == Kind::batch || k == Kind::first || k == Kind::middle ||
         k == Kind::last;
}

// "data", "sync", "end", "session", "loss", "batch", "first", "middle",
// "last" or "none".
const char* to_string(Kind k);

// The payload of a loss record: what an open dropped, in its recovery mode,
// so that every later recovery can still report it.
inline constexpr uint32_t kLossFixedPayload = 16;  // at, bytes; then the reason text
inline constexpr uint32_t kMaxLossReason = 1024;

struct LossRecord {
  Position at;
  uint64_t bytes = 0;
  std::string reason;
};

// The payload bytes of a loss record (the reason cut to kMaxLossReason).
std::string encode_loss(const LossRecord& loss);
LossRecord decode_loss(std::span<const std::byte> payload);

constexpr uint32_t framed_size(uint32_t payload) {
  return (kRecordHeaderSize + payload + kAlign - 1) & ~(kAlign - 1);
}

struct SegmentHeader {
  uint64_t segment_id = 0;
  uint64_t segment_size = 0;
  uint32_t block_size = 0;
  uint64_t log_id = 0;          // random, shared by every segment of one log directory
  uint32_t version = kVersion;  // as decoded; encode_header always writes kVersion
  // Encryption (version 6): the master key's id and the segment's random
  // nonce salt; both 0 when records are not encrypted.
  bool encrypted = false;
  uint32_t key_id = 0;
  uint64_t salt = 0;
  // Version 7, encrypted: tells a wrong key from damage (key_check_value()
  // of the segment's data key). Not read from older headers.
  uint32_t key_check = 0;
};

// The key check value to verify a key against: none before version 7.
inline std::optional<uint32_t> key_check_of(const SegmentHeader& h) {
  if (!h.encrypted || h.version < kFirstKeyCheckVersion) return std::nullopt;
  return h.key_check;
}

void encode_header(const SegmentHeader& h, std::span<std::byte> out);
// Fails with Errc::bad_directory and a reason (bad magic, version, checksum...).
[[nodiscard]] Result<SegmentHeader> decode_header(std::span<const std::byte> in);

// Frames a record at image[offset]: payload first, then the checksummed
// header. `image` must hold framed_size(payload.size()) bytes at offset.
void encode_record(std::span<std::byte> image, uint64_t segment_id, uint32_t offset, Kind kind,
                   std::span<const std::byte> payload);
// The same into `out` alone (framed_size(payload.size()) bytes), checksummed
// for `offset`: for a writer that does not hold the segment's image.
void encode_record_at(std::byte* out, uint64_t segment_id, uint32_t offset, Kind kind,
                      std::span<const std::byte> payload);
// The same with the payload given in pieces, copied one after the other
// and checksummed as one payload (no intermediate buffer).
// `flags` are the record word's bits 28-31 (transform.h); the pieces are
// then the stored (transformed) payload.
void encode_gathered(std::span<std::byte> image, uint64_t segment_id, uint32_t offset, Kind kind,
                     std::span<const std::span<const std::byte>> pieces, uint32_t flags = 0);
// The word of a record: stored length, kind and flags.
constexpr uint32_t record_word(Kind kind, uint32_t len, uint32_t flags) {
  return len | (static_cast<uint32_t>(kind) << 24) | flags;
}
// For a payload already in place at image[offset + 8, + len): zeroes the
// pad, then stores the word and the checksum.
void seal_record(std::span<std::byte> image, uint64_t segment_id, uint32_t offset, uint32_t word);
void encode_position_record(std::span<std::byte> image, uint64_t segment_id, uint32_t offset,
                            Kind kind, Position value);

enum class Decode {
  ok,     // a valid record
  empty,  // an all-zero header: nothing was written here
  bad,    // anything else: torn, damaged, stale or truncated
};

struct RecordView {
  Kind kind = Kind::none;
  uint32_t offset = 0;
  uint32_t framed = 0;  // bytes to the next record
  // The stored payload as decode_record gives it; SegmentReader::record
  // replaces it with the plain bytes of a transformed record.
  std::span<const std::byte> payload;
  uint32_t flags = 0;  // the word's bits 28-31 as stored
  // A compressed batch: its inner records' positions are 16 + 8 i past the
  // record, not their entries' offsets (batch.h).
  bool packed = false;
  // Encrypted and left so: read without a key where that was allowed
  // (synclog-dump); the payload is the stored bytes.
  bool sealed = false;
  Position position_payload() const;  // for sync and session records
  // A sync marker's wall-clock time (unix ns), given the version in its
  // segment's header; none before version 6 (their markers carry no time).
  std::optional<uint64_t> marker_time(uint32_t version) const;
};

struct Decoded {
  Decode status;
  RecordView record;
  const char* reason = nullptr;  // why a record is bad
  // Bad although its checksum is valid (it fails authentication or does not
  // decompress): only tampering, a wrong key or a writer bug do that, so it
  // is damage wherever it lies, never a torn write.
  bool damage = false;
};

// Decodes the record at `offset` in `image` (a segment's bytes from 0; may be
// shorter than the segment if the file was truncated).
Decoded decode_record(std::span<const std::byte> image, uint64_t segment_id, uint32_t offset);
// The same over part of a segment: window[0] is the segment's byte `base`.
// The window must reach past the record or to the end of what can be read
// (a shorter window reads as a record cut off by the end of the file).
Decoded decode_record(std::span<const std::byte> window, uint64_t base, uint64_t segment_id,
                      uint32_t offset);
// Why a record of this kind cannot have `len` plain payload bytes, or null:
// the kind/length rules, applied to a transformed record's plain bytes.
const char* check_plain(Kind kind, uint32_t len);
// The bytes a record header (8 bytes, or fewer at the end of a file) says
// its record spans, before any check: how much a windowed reader must hold
// to decode it.
uint32_t claimed_framed_size(std::span<const std::byte> header);

}  // namespace synclog::seg
