#include "segments/format.h"

#include <algorithm>
#include <cstring>

#include "io/crc32c.h"
#include "segments/batch.h"
#include "segments/transform.h"

namespace synclog::seg {
namespace {

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class T>
void store(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

constexpr uint32_t kHeaderCrcOffset = kHeaderSize - 4;

// The checksum salts the record with where it belongs (F2): the segment id
// and the offset, then the length/kind word, then the payload.
uint32_t salt_crc(uint64_t segment_id, uint32_t offset, uint32_t word) {
  std::byte salt[16];
  store(salt, segment_id);
  store(salt + 8, offset);
  store(salt + 12, word);
  return io::crc32c(0, salt);
}

uint32_t record_crc(uint64_t segment_id, uint32_t offset, uint32_t word,
                    std::span<const std::byte> payload) {
  return io::crc32c(salt_crc(segment_id, offset, word), payload);
}

// What makes a header word impossible, whatever the payload holds; null if
// it could be a record.
const char* check_word(uint32_t word) {
  const uint32_t len = word & kMaxPayload;
  const uint8_t kind_flags = static_cast<uint8_t>(word >> 24);
  const auto kind = static_cast<Kind>(kind_flags & 0x0f);
  if ((kind_flags & 0xf0) != 0) {
    // Transformed (version 6): user records only, two compression codes.
    if (!carries_user_bytes(kind) || (word & kReservedFlag) != 0 ||
        (word & kCompressionMask) == kCompressionMask) {
      return "reserved record flags set";
    }
    // A stored payload's length says nothing about the plain one beyond
    // what each transform adds.
    const uint32_t least = ((word & kEncryptedFlag) ? kTagSize : 0) +
                           ((word & kCompressionMask) ? kRawLenSize + 1 : 0);
    return len < least ? "transformed record too short" : nullptr;
  }
  switch (kind) {
    case Kind::data:
      // Any length, 0 included: an empty record's word is never 0, so its
      // header alone tells it from a slot nobody wrote (crc 0, word 0).
      return nullptr;
    case Kind::end:
      return len != 0 ? "bad end-of-segment record" : nullptr;
    case Kind::sync:
      return len < kPositionPayload || len % kAlign != 0 ? "bad marker length" : nullptr;
    case Kind::session:
      return len != kPositionPayload ? "bad marker length" : nullptr;
    case Kind::loss:
      return len < kLossFixedPayload || len > kLossFixedPayload + kMaxLossReason
                 ? "bad loss record length"
                 : nullptr;
    case Kind::batch:
      return len < kBatchMinPayload || len % kAlign != 0 ? "bad batch record length" : nullptr;
    case Kind::first:
      return len <= kFirstFixedPayload ? "bad fragment length" : nullptr;
    case Kind::middle:
    case Kind::last:
      return len == 0 ? "bad fragment length" : nullptr;
    default:
      return "unknown record kind";
  }
}

}  // namespace

void encode_header(const SegmentHeader& h, std::span<std::byte> out) {
  std::memset(out.data(), 0, kHeaderSize);
  std::byte* p = out.data();
  store(p + 0, kMagic);
  store(p + 8, kVersion);
  store(p + 12, h.encrypted ? kHeaderEncrypted : uint32_t{0});
  store(p + 16, h.segment_id);
  store(p + 24, h.segment_size);
  store(p + 32, h.block_size);
  store(p + 36, h.encrypted ? h.key_id : uint32_t{0});
  store(p + 40, h.log_id);
  store(p + 48, h.encrypted ? h.salt : uint64_t{0});
  store(p + 56, h.encrypted ? h.key_check : uint32_t{0});
  store(p + kHeaderCrcOffset, io::crc32c(0, out.first(kHeaderCrcOffset)));
}

Result<SegmentHeader> decode_header(std::span<const std::byte> in) {
  auto fail = [](std::string why) { return make_error(Errc::bad_directory, std::move(why)); };
  if (in.size() < kHeaderSize) return fail("file is shorter than a segment header");
  const std::byte* p = in.data();
  if (load<uint64_t>(p) != kMagic) return fail("not a synclog segment (bad magic)");
  if (load<uint32_t>(p + kHeaderCrcOffset) != io::crc32c(0, in.first(kHeaderCrcOffset))) {
    return fail("segment header checksum mismatch");
  }
  uint32_t version = load<uint32_t>(p + 8);
  if (version < kOldestReadableVersion || version > kVersion) {
    return fail("unsupported format version " + std::to_string(version) + " (this build reads " +
                std::to_string(kOldestReadableVersion) + " to " + std::to_string(kVersion) + ")");
  }
  const uint32_t flags = load<uint32_t>(p + 12);
  if ((flags & ~kHeaderEncrypted) != 0 || (flags != 0 && version < kFirstTransformVersion)) {
    return fail("unknown segment header flags");
  }
  SegmentHeader h;
  h.encrypted = (flags & kHeaderEncrypted) != 0;
  if (h.encrypted) {
    h.key_id = load<uint32_t>(p + 36);
    h.salt = load<uint64_t>(p + 48);
    if (version >= kFirstKeyCheckVersion) h.key_check = load<uint32_t>(p + 56);
  }
  h.segment_id = load<uint64_t>(p + 16);
  h.segment_size = load<uint64_t>(p + 24);
  h.block_size = load<uint32_t>(p + 32);
  h.log_id = load<uint64_t>(p + 40);
  h.version = version;
  if (h.segment_size < kHeaderSize + kRecordHeaderSize || h.segment_size > (1ull << 32)) {
    return fail("implausible segment size " + std::to_string(h.segment_size));
  }
  return h;
}

void encode_record(std::span<std::byte> image, uint64_t segment_id, uint32_t offset, Kind kind,
                   std::span<const std::byte> payload) {
  encode_record_at(image.data() + offset, segment_id, offset, kind, payload);
}

void encode_record_at(std::byte* p, uint64_t segment_id, uint32_t offset, Kind kind,
                      std::span<const std::byte> payload) {
  const uint32_t len = static_cast<uint32_t>(payload.size());
  const uint32_t word = len | (static_cast<uint32_t>(kind) << 24);
  if (!payload.empty()) std::memcpy(p + kRecordHeaderSize, payload.data(), len);
  const uint32_t pad = framed_size(len) - kRecordHeaderSize - len;
  if (pad > 0) std::memset(p + kRecordHeaderSize + len, 0, pad);
  store(p + 4, word);
  store(p, record_crc(segment_id, offset, word, payload));
}

void seal_record(std::span<std::byte> image, uint64_t segment_id, uint32_t offset, uint32_t word) {
  std::byte* p = image.data() + offset;
  const uint32_t len = word & kMaxPayload;
  const uint32_t pad = framed_size(len) - kRecordHeaderSize - len;
  if (pad > 0) std::memset(p + kRecordHeaderSize + len, 0, pad);
  store(p + 4, word);
  store(p, record_crc(segment_id, offset, word,
                      std::span<const std::byte>(p + kRecordHeaderSize, len)));
}

void encode_gathered(std::span<std::byte> image, uint64_t segment_id, uint32_t offset, Kind kind,
                     std::span<const std::span<const std::byte>> pieces, uint32_t flags) {
  std::byte* p = image.data() + offset;
  uint64_t len = 0;
  for (const auto& piece : pieces) len += piece.size();
  const uint32_t word = record_word(kind, static_cast<uint32_t>(len), flags);
  uint32_t crc = salt_crc(segment_id, offset, word);
  std::byte* at = p + kRecordHeaderSize;
  for (const auto& piece : pieces) {
    if (piece.empty()) continue;
    std::memcpy(at, piece.data(), piece.size());
    crc = io::crc32c(crc, piece);
    at += piece.size();
  }
  const uint32_t pad =
      framed_size(static_cast<uint32_t>(len)) - kRecordHeaderSize - static_cast<uint32_t>(len);
  if (pad > 0) std::memset(at, 0, pad);
  store(p + 4, word);
  store(p, crc);
}

void encode_position_record(std::span<std::byte> image, uint64_t segment_id, uint32_t offset,
                            Kind kind, Position value) {
  std::byte payload[kPositionPayload];
  store(payload, value.raw());
  encode_record(image, segment_id, offset, kind, payload);
}

const char* to_string(Kind k) {
  switch (k) {
    case Kind::data:
      return "data";
    case Kind::sync:
      return "sync";
    case Kind::end:
      return "end";
    case Kind::session:
      return "session";
    case Kind::loss:
      return "loss";
    case Kind::batch:
      return "batch";
    case Kind::first:
      return "first";
    case Kind::middle:
      return "middle";
    case Kind::last:
      return "last";
    case Kind::none:
      break;
  }
  return "none";
}

std::string encode_loss(const LossRecord& loss) {
  const size_t reason = std::min<size_t>(loss.reason.size(), kMaxLossReason);
  std::string out(kLossFixedPayload + reason, '\0');
  auto* p = reinterpret_cast<std::byte*>(out.data());
  store(p, loss.at.raw());
  store(p + 8, loss.bytes);
  std::memcpy(p + kLossFixedPayload, loss.reason.data(), reason);
  return out;
}

LossRecord decode_loss(std::span<const std::byte> payload) {
  LossRecord l;
  if (payload.size() < kLossFixedPayload) return l;
  l.at = Position::from_raw(load<uint64_t>(payload.data()));
  l.bytes = load<uint64_t>(payload.data() + 8);
  l.reason.assign(reinterpret_cast<const char*>(payload.data()) + kLossFixedPayload,
                  payload.size() - kLossFixedPayload);
  return l;
}

Position RecordView::position_payload() const {
  return payload.size() >= kPositionPayload ? Position::from_raw(load<uint64_t>(payload.data()))
                                            : Position{};
}

std::optional<uint64_t> RecordView::marker_time(uint32_t version) const {
  if (kind != Kind::sync || version < kFirstTimedMarkerVersion || payload.size() < kMarkerPayload)
    return std::nullopt;
  return load<uint64_t>(payload.data() + kPositionPayload);
}

const char* check_plain(Kind kind, uint32_t len) {
  return check_word(record_word(kind, len & kMaxPayload, 0));
}

uint32_t claimed_framed_size(std::span<const std::byte> header) {
  if (header.size() < kRecordHeaderSize) return kRecordHeaderSize;
  const uint32_t word = load<uint32_t>(header.data() + 4);
  // A header no payload can make valid needs no payload read to judge it.
  if (check_word(word) != nullptr) return kRecordHeaderSize;
  return framed_size(word & kMaxPayload);
}

Decoded decode_record(std::span<const std::byte> image, uint64_t segment_id, uint32_t offset) {
  return decode_record(image, 0, segment_id, offset);
}

Decoded decode_record(std::span<const std::byte> window, uint64_t base, uint64_t segment_id,
                      uint32_t offset) {
  Decoded d{Decode::bad, {}, nullptr};
  const uint64_t end = base + window.size();
  if (offset % kAlign != 0 || offset < base || uint64_t{offset} + kRecordHeaderSize > end) {
    d.reason = "record header cut off";
    return d;
  }
  const std::byte* p = window.data() + (offset - base);
  const uint32_t crc = load<uint32_t>(p);
  const uint32_t word = load<uint32_t>(p + 4);
  if (crc == 0 && word == 0) {
    d.status = Decode::empty;
    return d;
  }
  const uint32_t len = word & kMaxPayload;
  const auto kind = static_cast<Kind>((word >> 24) & 0x0f);
  if (const char* why = check_word(word)) {
    d.reason = why;
    return d;
  }
  const uint64_t framed = framed_size(len);
  if (offset + framed > end) {
    d.reason = "record runs past the end of the segment";
    return d;
  }
  auto payload = window.subspan(offset - base + kRecordHeaderSize, len);
  if (record_crc(segment_id, offset, word, payload) != crc) {
    d.reason = "record checksum mismatch";
    return d;
  }
  // A checksum over a malformed batch means a writer bug or crafted bytes:
  // bad like damage, so no reader has to trust the inner lengths.
  // (A transformed batch is checked once its plain bytes are known.)
  if (kind == Kind::batch && (word >> 28) == 0) {
    if (const char* why = check_batch(payload)) {
      d.reason = why;
      return d;
    }
  }
  d.status = Decode::ok;
  d.record = RecordView{kind, offset, static_cast<uint32_t>(framed), payload, word & 0xf0000000u};
  return d;
}

}  // namespace synclog::seg
