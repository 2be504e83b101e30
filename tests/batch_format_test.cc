// The batch record (kind 6) at the format level: its layout, the positions
// of its inner records, and the decoder refusing any batch whose structure
// does not add up even when its checksum matches.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "io/crc32c.h"
#include "segments/batch.h"
#include "segments/format.h"

namespace synclog::seg {
namespace {

std::span<const std::byte> bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

struct Encoded {
  std::vector<std::byte> image;
  std::vector<uint32_t> entries;  // each inner record's offset in the segment
};

Encoded encode_batch(const std::vector<std::string>& records, uint32_t at = 64) {
  std::vector<std::span<const std::byte>> spans;
  for (const auto& r : records) spans.push_back(bytes(r));
  const BatchLayout layout(spans);
  Encoded e;
  e.image.resize(at + framed_size(static_cast<uint32_t>(layout.payload_size())) + 64);
  encode_gathered(e.image, 5, at, Kind::batch, layout.pieces());
  for (size_t i = 0; i < records.size(); ++i) e.entries.push_back(at + layout.entry_offset(i));
  return e;
}

// Rewrites the batch record at 64 with `payload` under a valid checksum.
std::vector<std::byte> with_payload(const std::vector<std::byte>& payload) {
  std::vector<std::byte> image(64 + framed_size(static_cast<uint32_t>(payload.size())) + 64);
  encode_record(image, 5, 64, Kind::batch, payload);
  return image;
}

void put32(std::vector<std::byte>& v, size_t at, uint32_t x) { std::memcpy(&v[at], &x, 4); }

uint32_t crc_of_header(const std::vector<std::byte>& h) {
  return io::crc32c(0, std::span(h).first(kHeaderSize - 4));
}

TEST(BatchFormat, InnerRecordsComeBackAtTheirEntries) {
  const std::vector<std::string> records = {"a", "12345678", "123456789", std::string(300, 'x')};
  const Encoded e = encode_batch(records);
  const Decoded d = decode_record(e.image, 5, 64);
  ASSERT_EQ(d.status, Decode::ok) << d.reason;
  ASSERT_EQ(d.record.kind, Kind::batch);
  EXPECT_EQ(batch_count(d.record), records.size());
  EXPECT_EQ(first_entry(d.record), 64u + 16u);
  EXPECT_EQ(last_entry(d.record), e.entries.back());
  size_t i = 0;
  for (auto r = inner_at(d.record, first_entry(d.record)); r;
       r = inner_at(d.record, r->offset + r->framed), ++i) {
    ASSERT_LT(i, records.size());
    EXPECT_EQ(r->offset, e.entries[i]);
    EXPECT_EQ(r->offset % kAlign, 0u) << "inner records start 8-aligned, like records";
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(r->data.data()), r->data.size()),
              records[i]);
    EXPECT_TRUE(is_entry(d.record, r->offset));
    EXPECT_FALSE(is_entry(d.record, r->offset + 8));
  }
  EXPECT_EQ(i, records.size());
  // Entries fill the frame exactly: the next record starts where the last
  // entry ends.
  EXPECT_EQ(64 + d.record.framed, e.entries.back() + batch_entry_size(300));
}

TEST(BatchFormat, EntryHeadersLeadBackToTheirBatch) {
  const Encoded e = encode_batch({"one", "two", "three"}, 4096);
  for (uint32_t at : e.entries) {
    auto b = batch_from_entry(std::span(e.image).subspan(at, kEntryHeader), at);
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(*b, 4096u);
  }
}

TEST(BatchFormat, GatheredEncodingEqualsOneBuffer) {
  const std::string whole = "hello, gathered world";
  std::vector<std::byte> a(128), b(128);
  encode_record(a, 9, 64, Kind::data, bytes(whole));
  const std::string p1 = "hello", p2 = "", p3 = ", gathered", p4 = " world";
  const std::span<const std::byte> pieces[] = {bytes(p1), bytes(p2), bytes(p3), bytes(p4)};
  encode_gathered(b, 9, 64, Kind::data, pieces);
  EXPECT_EQ(a, b);
}

TEST(BatchFormat, EveryBitFlipInABatchIsDetected) {
  const Encoded e = encode_batch({"alpha", "beta", "gamma"});
  const uint32_t framed = decode_record(e.image, 5, 64).record.framed;
  for (uint32_t byte = 64; byte < 64 + framed; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      auto copy = e.image;
      copy[byte] ^= std::byte{static_cast<uint8_t>(1u << bit)};
      const Decoded d = decode_record(copy, 5, 64);
      // A batch payload is a multiple of 8: no framing pad, so every byte
      // of the frame is the header or checksummed payload.
      EXPECT_NE(d.status, Decode::ok) << "flip of bit " << bit << " at byte " << byte;
    }
  }
}

TEST(BatchFormat, ShortOrMalformedBatchesAreBadDespiteTheirChecksum) {
  // count 2, but one entry: the batch was cut after its first record.
  std::vector<std::byte> p(kBatchHeader + kEntryHeader + 8);
  put32(p, 0, 2);
  put32(p, 8, 3);
  put32(p, 12, 16);
  EXPECT_STREQ(decode_record(with_payload(p), 5, 64).reason, "batch record shorter than its count");
  put32(p, 0, 0);
  EXPECT_STREQ(decode_record(with_payload(p), 5, 64).reason, "empty batch record");
  put32(p, 0, 1);
  put32(p, 12, 24);
  EXPECT_STREQ(decode_record(with_payload(p), 5, 64).reason, "batch entry names another batch");
  put32(p, 12, 16);
  put32(p, 8, 9);
  EXPECT_STREQ(decode_record(with_payload(p), 5, 64).reason, "batch entry runs past the batch");
  // An empty inner record (version 4) is an 8-byte entry: this payload is
  // one entry header too long for it.
  put32(p, 8, 0);
  EXPECT_STREQ(decode_record(with_payload(p), 5, 64).reason,
               "batch record longer than its entries");
  put32(p, 8, 3);
  put32(p, 4, 1);
  EXPECT_STREQ(decode_record(with_payload(p), 5, 64).reason, "reserved batch field set");
  put32(p, 4, 0);
  EXPECT_EQ(decode_record(with_payload(p), 5, 64).status, Decode::ok);
  std::vector<std::byte> longer(p);
  longer.resize(p.size() + 8);
  EXPECT_STREQ(decode_record(with_payload(longer), 5, 64).reason,
               "batch record longer than its entries");
  // Lengths the word itself rules out.
  std::vector<std::byte> image(256);
  encode_record(image, 5, 64, Kind::batch, std::span(p).first(20));
  EXPECT_STREQ(decode_record(image, 5, 64).reason, "bad batch record length");
}

// Version 4: inner records may be empty. Each still has its own entry, so
// its own position, and leads back to its batch.
TEST(BatchFormat, EmptyInnerRecordsHaveTheirOwnEntries) {
  const std::vector<std::string> records = {"", "a", "", "", std::string(9, 'n'), ""};
  for (uint32_t at : {64u, 72u, 4096u}) {
    const Encoded e = encode_batch(records, at);
    const Decoded d = decode_record(e.image, 5, at);
    ASSERT_EQ(d.status, Decode::ok) << d.reason;
    EXPECT_EQ(batch_count(d.record), records.size());
    size_t i = 0;
    for (auto r = inner_at(d.record, first_entry(d.record)); r;
         r = inner_at(d.record, r->offset + r->framed), ++i) {
      ASSERT_LT(i, records.size());
      EXPECT_EQ(r->offset, e.entries[i]);
      EXPECT_EQ(r->framed, batch_entry_size(records[i].size()));
      EXPECT_EQ(r->data.size(), records[i].size());
      EXPECT_TRUE(is_entry(d.record, r->offset));
      auto b = batch_from_entry(std::span(e.image).subspan(r->offset, kEntryHeader), r->offset);
      ASSERT_TRUE(b.has_value());
      EXPECT_EQ(*b, at);
      // An entry header never reads as a record, valid or unwritten.
      EXPECT_EQ(decode_record(e.image, 5, r->offset).status, Decode::bad);
    }
    EXPECT_EQ(i, records.size());
    EXPECT_EQ(last_entry(d.record), e.entries.back());
    EXPECT_EQ(batch_entry_size(0), kEntryHeader);
  }
  // A batch of one empty record is the smallest batch.
  const Encoded one = encode_batch({""});
  const Decoded d = decode_record(one.image, 5, 64);
  ASSERT_EQ(d.status, Decode::ok) << d.reason;
  EXPECT_EQ(d.record.payload.size(), kBatchHeader + kEntryHeader);
  EXPECT_EQ(kBatchMinPayload, kBatchHeader + kEntryHeader);
  // Every bit flip in it is still caught.
  for (uint32_t byte = 64; byte < 64 + d.record.framed; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      auto copy = one.image;
      copy[byte] ^= std::byte{static_cast<uint8_t>(1u << bit)};
      EXPECT_NE(decode_record(copy, 5, 64).status, Decode::ok) << byte << " " << bit;
    }
  }
}

TEST(BatchFormat, TruncatedBatchIsBad) {
  const Encoded e = encode_batch({"first", "second", std::string(100, 's')});
  const uint32_t framed = decode_record(e.image, 5, 64).record.framed;
  for (uint32_t cut = 64; cut < 64 + framed; ++cut) {
    const Decoded d = decode_record(std::span(e.image).first(cut), 5, 64);
    EXPECT_EQ(d.status, Decode::bad) << "cut at " << cut;
  }
}

TEST(BatchFormat, HeadersSayVersion7AndOlderVersionsStayReadable) {
  std::vector<std::byte> buf(kHeaderSize);
  encode_header(SegmentHeader{1, 1 << 20, 4096}, buf);
  auto h = decode_header(buf);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->version, 7u);
  EXPECT_EQ(kVersion, 7u);
  EXPECT_EQ(kOldestReadableVersion, 1u);
  // Versions 1..6 are read; 8 is refused, naming what this build reads.
  auto with_version = [&](uint32_t v) {
    std::vector<std::byte> b(buf);
    std::memcpy(&b[8], &v, 4);
    const uint32_t crc = crc_of_header(b);
    std::memcpy(&b[60], &crc, 4);
    return decode_header(b);
  };
  for (uint32_t v : {1u, 2u, 3u, 4u, 5u, 6u, 7u}) {
    auto old = with_version(v);
    ASSERT_TRUE(old.has_value()) << "version " << v << ": " << old.error().message;
    EXPECT_EQ(old->version, v);
  }
  auto future = with_version(8);
  ASSERT_FALSE(future.has_value());
  EXPECT_NE(future.error().message.find("unsupported format version 8 (this build reads 1 to 7)"),
            std::string::npos)
      << future.error().message;
  std::string s = to_string(Kind::batch);
  EXPECT_EQ(s, "batch");
}

}  // namespace
}  // namespace synclog::seg
