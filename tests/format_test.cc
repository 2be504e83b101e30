#include "segments/format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace synclog::seg {
namespace {

std::vector<std::byte> bytes_of(std::string_view s) {
  std::vector<std::byte> v(s.size());
  std::memcpy(v.data(), s.data(), s.size());
  return v;
}

TEST(Format, HeaderRoundTrip) {
  std::vector<std::byte> buf(kHeaderSize);
  encode_header(SegmentHeader{42, 1 << 20, 4096}, buf);
  auto h = decode_header(buf);
  ASSERT_TRUE(h.has_value()) << h.error().message;
  EXPECT_EQ(h->segment_id, 42u);
  EXPECT_EQ(h->segment_size, 1u << 20);
  EXPECT_EQ(h->block_size, 4096u);
}

TEST(Format, HeaderDamageIsNamed) {
  std::vector<std::byte> buf(kHeaderSize);
  encode_header(SegmentHeader{7, 1 << 20, 4096}, buf);
  for (size_t i = 0; i < kHeaderSize; ++i) {
    auto copy = buf;
    copy[i] ^= std::byte{0x10};
    auto h = decode_header(copy);
    EXPECT_FALSE(h.has_value()) << "flip at byte " << i << " went unnoticed";
  }
  EXPECT_NE(decode_header(std::span(buf).first(10)).error().message.find("shorter"),
            std::string::npos);
  std::vector<std::byte> zeros(kHeaderSize);
  EXPECT_NE(decode_header(zeros).error().message.find("magic"), std::string::npos);
}

TEST(Format, RecordRoundTripAndAlignment) {
  std::vector<std::byte> image(4096);
  uint32_t off = kHeaderSize;
  for (size_t len : {1, 7, 8, 9, 100}) {
    auto payload = bytes_of(std::string(len, 'x'));
    encode_record(image, 3, off, Kind::data, payload);
    auto d = decode_record(image, 3, off);
    ASSERT_EQ(d.status, Decode::ok) << d.reason;
    EXPECT_EQ(d.record.payload.size(), len);
    EXPECT_EQ(d.record.framed % kAlign, 0u);  // F4
    off += d.record.framed;
  }
  EXPECT_EQ(decode_record(image, 3, off).status, Decode::empty);
}

TEST(Format, ChecksumCoversSegmentAndOffset) {  // F2
  std::vector<std::byte> image(4096);
  auto payload = bytes_of("hello");
  encode_record(image, 5, 64, Kind::data, payload);
  EXPECT_EQ(decode_record(image, 5, 64).status, Decode::ok);
  EXPECT_EQ(decode_record(image, 6, 64).status, Decode::bad);  // recycled file, new id
  // The same bytes copied to another offset do not validate there.
  std::memcpy(image.data() + 128, image.data() + 64, 16);
  EXPECT_EQ(decode_record(image, 5, 128).status, Decode::bad);
}

TEST(Format, EveryBitFlipIsDetected) {
  std::vector<std::byte> image(256);
  encode_record(image, 9, 64, Kind::data, bytes_of("some record bytes"));
  const uint32_t framed = framed_size(17);
  for (uint32_t byte = 64; byte < 64 + kRecordHeaderSize + 17; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      auto copy = image;
      copy[byte] ^= std::byte(1 << bit);
      auto d = decode_record(copy, 9, 64);
      EXPECT_NE(d.status, Decode::ok) << "byte " << byte << " bit " << bit;
    }
  }
  EXPECT_EQ(framed, 32u);
}

TEST(Format, ReservedFlagsAndKindsAreRejected) {  // F6
  std::vector<std::byte> image(256);
  encode_record(image, 1, 64, Kind::data, bytes_of("abc"));
  auto copy = image;
  copy[64 + 7] |= std::byte{0x80};  // bit 31: a flag bit of a future version
  EXPECT_STREQ(decode_record(copy, 1, 64).reason, "reserved record flags set");
  copy = image;
  copy[64 + 7] |= std::byte{0x30};  // compression code 3: invalid
  EXPECT_STREQ(decode_record(copy, 1, 64).reason, "reserved record flags set");
  copy = image;
  copy[64 + 7] = std::byte{0x0a};  // the first kind after `last`
  EXPECT_STREQ(decode_record(copy, 1, 64).reason, "unknown record kind");
}

TEST(Format, LossRecordRoundTrips) {
  const LossRecord loss{Position(3, 4096), 12345, "record checksum mismatch (accepted by x)"};
  const std::string payload = encode_loss(loss);
  ASSERT_EQ(payload.size(), kLossFixedPayload + loss.reason.size());
  std::vector<std::byte> image(256);
  encode_record(image, 7, 64, Kind::loss, std::as_bytes(std::span(payload)));
  const Decoded d = decode_record(image, 7, 64);
  ASSERT_EQ(d.status, Decode::ok) << d.reason;
  ASSERT_EQ(d.record.kind, Kind::loss);
  const LossRecord back = decode_loss(d.record.payload);
  EXPECT_EQ(back.at, loss.at);
  EXPECT_EQ(back.bytes, loss.bytes);
  EXPECT_EQ(back.reason, loss.reason);
  // Shorter than its fixed fields: bad.
  encode_record(image, 7, 64, Kind::loss, std::as_bytes(std::span(payload).first(8)));
  EXPECT_STREQ(decode_record(image, 7, 64).reason, "bad loss record length");
}

TEST(Format, TruncatedRecordIsBad) {
  std::vector<std::byte> image(256);
  encode_record(image, 1, 64, Kind::data, bytes_of(std::string(40, 'z')));
  for (size_t cut = 64; cut < 64 + framed_size(40); ++cut) {
    auto d = decode_record(std::span(image).first(cut), 1, 64);
    EXPECT_EQ(d.status, Decode::bad) << cut;
  }
}

TEST(Format, PositionMarkers) {
  std::vector<std::byte> image(256);
  encode_position_record(image, 2, 64, Kind::sync, Position(2, 1000));
  auto d = decode_record(image, 2, 64);
  ASSERT_EQ(d.status, Decode::ok);
  EXPECT_EQ(d.record.kind, Kind::sync);
  EXPECT_EQ(d.record.position_payload(), Position(2, 1000));
}

// Version 6: a sync marker's second u64 is the wall-clock time its sync
// began; in older segments those bytes are tail=pad padding, not a time.
TEST(Format, MarkerTimeOnlyFromVersion6) {
  std::vector<std::byte> image(256);
  std::byte payload[kMarkerPayload + 8] = {};
  const uint64_t durable = Position(2, 1000).raw(), wall = 1'700'000'000'123'456'789ull;
  std::memcpy(payload, &durable, 8);
  std::memcpy(payload + 8, &wall, 8);
  encode_record(image, 2, 64, Kind::sync, payload);
  auto d = decode_record(image, 2, 64);
  ASSERT_EQ(d.status, Decode::ok);
  EXPECT_EQ(d.record.position_payload(), Position(2, 1000));
  EXPECT_EQ(d.record.marker_time(6), wall);
  EXPECT_EQ(d.record.marker_time(5), std::nullopt);
  // A marker of 8 bytes (written before version 6) has no time whatever
  // the header says.
  encode_position_record(image, 2, 128, Kind::sync, Position(2, 1000));
  auto old = decode_record(image, 2, 128);
  ASSERT_EQ(old.status, Decode::ok);
  EXPECT_EQ(old.record.marker_time(6), std::nullopt);
}

// Version 4: a data record may be empty. Its frame is the 8-byte header
// alone, and its checksum over (segment id, offset, word) is what tells it
// from an unwritten slot (crc 0, word 0).
TEST(Format, EmptyDataRecordRoundTripsAtEveryOffset) {
  std::vector<std::byte> image(4096);
  for (uint32_t off = kHeaderSize; off + kRecordHeaderSize <= 1024; off += kAlign) {
    encode_record(image, 11, off, Kind::data, {});
  }
  for (uint32_t off = kHeaderSize; off + kRecordHeaderSize <= 1024; off += kAlign) {
    const Decoded d = decode_record(image, 11, off);
    ASSERT_EQ(d.status, Decode::ok) << "at " << off << ": " << d.reason;
    EXPECT_EQ(d.record.kind, Kind::data);
    EXPECT_EQ(d.record.offset, off);
    EXPECT_EQ(d.record.framed, kRecordHeaderSize);
    EXPECT_TRUE(d.record.payload.empty());
    EXPECT_EQ(claimed_framed_size(std::span(image).subspan(off, kRecordHeaderSize)),
              kRecordHeaderSize);
    // Valid only where it was written (F2).
    EXPECT_EQ(decode_record(image, 12, off).status, Decode::bad);
  }
  EXPECT_EQ(decode_record(image, 11, 1024).status, Decode::empty);
  EXPECT_EQ(framed_size(0), kRecordHeaderSize);
  // A header-only window reads it whole.
  const Decoded w = decode_record(std::span(image).subspan(72, 8), 72, 11, 72);
  EXPECT_EQ(w.status, Decode::ok) << w.reason;
  // Gathered from nothing, or from empty pieces: the same bytes.
  std::vector<std::byte> gathered(4096);
  const std::span<const std::byte> none[] = {{}, {}};
  encode_gathered(gathered, 11, 64, Kind::data, none);
  encode_gathered(gathered, 11, 72, Kind::data, {});
  EXPECT_TRUE(std::equal(gathered.begin() + 64, gathered.begin() + 80, image.begin() + 64));
}

TEST(Format, EmptyDataRecordWithAFlippedBitIsBadNotEmpty) {
  std::vector<std::byte> image(256);
  encode_record(image, 9, 64, Kind::data, {});
  for (uint32_t byte = 64; byte < 64 + kRecordHeaderSize; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      auto copy = image;
      copy[byte] ^= std::byte(1 << bit);
      const Decoded d = decode_record(copy, 9, 64);
      EXPECT_EQ(d.status, Decode::bad) << "byte " << byte << " bit " << bit;
    }
  }
  // Cut short anywhere inside its header: bad too, never empty.
  for (size_t cut = 64; cut < 64 + kRecordHeaderSize; ++cut) {
    EXPECT_EQ(decode_record(std::span(image).first(cut), 9, 64).status, Decode::bad) << cut;
  }
  // Its word with the checksum zeroed, or the checksum with the word
  // zeroed, is a torn header, not a slot nobody wrote.
  auto no_crc = image;
  std::fill(no_crc.begin() + 64, no_crc.begin() + 68, std::byte{0});
  EXPECT_EQ(decode_record(no_crc, 9, 64).status, Decode::bad);
  auto no_word = image;
  std::fill(no_word.begin() + 68, no_word.begin() + 72, std::byte{0});
  EXPECT_EQ(decode_record(no_word, 9, 64).status, Decode::bad);
  // Only crc 0 and word 0 together is an empty slot.
  std::vector<std::byte> zeros(256);
  EXPECT_EQ(decode_record(zeros, 9, 64).status, Decode::empty);
}

}  // namespace
}  // namespace synclog::seg
