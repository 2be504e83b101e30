#include "io/crc32c.h"

#include <nmmintrin.h>

#include <array>
#include <cstring>

namespace synclog::io {
namespace {

constexpr uint32_t kPoly = 0x82f63b78;  // reflected Castagnoli polynomial

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? kPoly : 0);
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kTable = make_table();

uint32_t crc_soft(uint32_t crc, const unsigned char* p, size_t n) {
  while (n-- > 0) crc = kTable[(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return crc;
}

__attribute__((target("sse4.2"))) uint32_t crc_hw(uint32_t crc, const unsigned char* p,
                                                  size_t n) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n-- > 0) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

const bool kHaveHw = __builtin_cpu_supports("sse4.2");

}  // namespace

uint32_t crc32c(uint32_t crc, std::span<const std::byte> data) {
  auto* p = reinterpret_cast<const unsigned char*>(data.data());
  crc = ~crc;
  crc = kHaveHw ? crc_hw(crc, p, data.size()) : crc_soft(crc, p, data.size());
  return ~crc;
}

}  // namespace synclog::io
