#include "io/crc32c.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string_view>
#include <vector>

namespace synclog::io {
namespace {

// Bit at a time, straight from the definition: reflected polynomial
// 0x82f63b78, register inverted on the way in and out (so chaining works the
// same as crc32c's).
uint32_t crc_reference(uint32_t crc, std::span<const std::byte> data) {
  crc = ~crc;
  for (std::byte b : data) {
    crc ^= static_cast<uint32_t>(b);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ ((crc & 1) ? 0x82f63b78u : 0);
  }
  return ~crc;
}

std::span<const std::byte> bytes_of(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

std::vector<std::byte> random_bytes(size_t n, std::mt19937_64& rng) {
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

TEST(Crc32c, KnownAnswers) {
  EXPECT_EQ(crc32c(0, bytes_of("123456789")), 0xE3069283u);
  // RFC 3720, B.4.
  std::vector<std::byte> buf(32);
  EXPECT_EQ(crc32c(0, buf), 0x8A9136AAu);
  std::fill(buf.begin(), buf.end(), std::byte{0xff});
  EXPECT_EQ(crc32c(0, buf), 0x62A8AB43u);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<std::byte>(i);
  EXPECT_EQ(crc32c(0, buf), 0x46DD794Eu);
  EXPECT_EQ(crc32c(0, {}), 0u);
  EXPECT_EQ(crc32c(0x12345678, {}), 0x12345678u);
}

TEST(Crc32c, ReferenceAgrees) { EXPECT_EQ(crc_reference(0, bytes_of("123456789")), 0xE3069283u); }

// Every prefix length up to 5000 and random ones up to 1 MiB, at every start
// misalignment 0..7. The reference CRC of each prefix comes from extending the
// previous one by a byte, so the bitwise reference stays linear in the size.
TEST(Crc32c, MatchesReferenceAtEveryLengthAndAlignment) {
  constexpr size_t kMax = 1 << 20;
  std::mt19937_64 rng(12345);
  const std::vector<std::byte> buf = random_bytes(kMax + 8, rng);
  // Lengths where an interleaved implementation changes block size or ends a
  // block exactly, beyond the exhaustive range.
  std::vector<size_t> lengths = {3 * 4096 - 1,
                                 3 * 4096,
                                 3 * 4096 + 1,
                                 3 * 4096 + 8,
                                 2 * 3 * 4096 + 3 * 1024 + 3 * 256 + 3 * 64 + 7,
                                 kMax - 1,
                                 kMax};
  for (int i = 0; i < 40; ++i) lengths.push_back(rng() % (kMax + 1));
  for (size_t n = 0; n <= 5000; ++n) lengths.push_back(n);
  std::sort(lengths.begin(), lengths.end());

  for (size_t offset = 0; offset < 8; ++offset) {
    std::span<const std::byte> data(buf.data() + offset, kMax);
    uint32_t ref = 0;  // reference CRC of data.first(done)
    size_t done = 0;
    for (size_t n : lengths) {
      ref = crc_reference(ref, data.subspan(done, n - done));
      done = n;
      ASSERT_EQ(crc32c(0, data.first(n)), ref) << "length " << n << " offset " << offset;
    }
  }
}

TEST(Crc32c, NonZeroStartMatchesReference) {
  std::mt19937_64 rng(7);
  for (size_t n : {0, 1, 191, 192, 255, 256, 1000, 4096, 20000}) {
    const auto data = random_bytes(n, rng);
    const auto start = static_cast<uint32_t>(rng());
    EXPECT_EQ(crc32c(start, data), crc_reference(start, data)) << "length " << n;
  }
}

// crc32c(crc32c(0, a), b) == crc32c(0, a + b), for pieces cut at random points.
TEST(Crc32c, ChainedPiecesMatchOneCall) {
  std::mt19937_64 rng(99);
  for (int round = 0; round < 300; ++round) {
    const size_t n = rng() % (round < 200 ? 20000 : 300000);
    const auto buf = random_bytes(n + 8, rng);
    const std::span<const std::byte> data(buf.data() + rng() % 8, n);
    const uint32_t whole = crc32c(0, data);
    const int pieces = 1 + static_cast<int>(rng() % 5);
    std::vector<size_t> cuts = {0, n};
    for (int i = 1; i < pieces; ++i) cuts.push_back(n == 0 ? 0 : rng() % (n + 1));
    std::sort(cuts.begin(), cuts.end());
    uint32_t crc = 0;
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      crc = crc32c(crc, data.subspan(cuts[i], cuts[i + 1] - cuts[i]));
    }
    ASSERT_EQ(crc, whole) << "length " << n << " round " << round;
  }
  // And once against the reference, so chaining is not only self-consistent.
  const auto buf = random_bytes(50000, rng);
  const std::span<const std::byte> data(buf);
  EXPECT_EQ(crc32c(crc32c(0, data.first(12345)), data.subspan(12345)), crc_reference(0, data));
}

}  // namespace
}  // namespace synclog::io
