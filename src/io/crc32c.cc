#include "io/crc32c.h"

#include <nmmintrin.h>
#include <wmmintrin.h>

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

uint64_t load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

__attribute__((target("sse4.2"))) uint32_t crc_hw(uint32_t crc, const unsigned char* p, size_t n) {
  uint64_t c = crc;
  while (n >= 8) {
    c = _mm_crc32_u64(c, load64(p));
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n-- > 0) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

// The CRC register is a polynomial of degree < 32 over GF(2), bit i holding
// the coefficient of x^(31-i) (the reflected order). Feeding bits in
// multiplies by x modulo P; so x^n mod P is 1 (bit 31) multiplied by x n times.
constexpr uint32_t xpow_mod(uint64_t n) {
  uint32_t v = 0x80000000u;
  while (n-- > 0) v = (v >> 1) ^ ((v & 1) ? kPoly : 0);
  return v;
}

// The three streams of a 3 * len stretch are CRCed independently (a from the
// running value, b and c from 0) so the crc32 unit, which has a 3-cycle
// latency and 1-cycle throughput, works on three chains at once. By
// linearity the CRC of the whole stretch is
//   a * x^(16 len) + b * x^(8 len) + c  (mod P),
// i.e. a and b as if followed by 2 len and len zero bytes.
//
// Those products come from PCLMULQDQ plus one crc32. A carry-less product of
// two reflected 32-bit values is a 64-bit value whose bit k holds the
// coefficient of x^(62-k); read as a reflected 64-bit message (bit k <->
// x^(63-k)) it is x * A * K. crc32 of a 64-bit message from 0 multiplies it by
// x^32 mod P. So crc32(0, clmul(A, K)) = A * K * x^33, and K = x^(8N-33)
// shifts A by N bytes. Both products are summed before the one crc32, which
// is linear.
struct Block {
  size_t len;
  uint32_t k_len;   // x^(8 len - 33) mod P: shifts b past c
  uint32_t k_2len;  // x^(16 len - 33) mod P: shifts a past b and c
};
constexpr Block make_block(size_t len) {
  return {len, xpow_mod(8 * len - 33), xpow_mod(16 * len - 33)};
}
// Largest first. Each iteration pays ~10 cycles of combining, so blocks stay
// large where the input is; a leftover under 3 * 64 bytes goes through the
// single chain, and so do whole inputs that short (without the set-up cost).
constexpr std::array<Block, 4> kBlocks = {make_block(4096), make_block(1024), make_block(256),
                                          make_block(64)};

__attribute__((target("sse4.2,pclmul"))) uint64_t clmul(uint32_t a, uint32_t b) {
  __m128i p = _mm_clmulepi64_si128(_mm_cvtsi32_si128(static_cast<int>(a)),
                                   _mm_cvtsi32_si128(static_cast<int>(b)), 0x00);
  return static_cast<uint64_t>(_mm_cvtsi128_si64(p));
}

__attribute__((target("sse4.2,pclmul"))) uint32_t crc_hw3(uint32_t crc, const unsigned char* p,
                                                          size_t n) {
  for (const Block& blk : kBlocks) {
    const size_t len = blk.len;
    while (n >= 3 * len) {
      uint64_t a = crc, b = 0, c = 0;
      for (const unsigned char* end = p + len; p < end; p += 8) {
        a = _mm_crc32_u64(a, load64(p));
        b = _mm_crc32_u64(b, load64(p + len));
        c = _mm_crc32_u64(c, load64(p + 2 * len));
      }
      uint64_t shifted =
          clmul(static_cast<uint32_t>(a), blk.k_2len) ^ clmul(static_cast<uint32_t>(b), blk.k_len);
      crc = static_cast<uint32_t>(_mm_crc32_u64(0, shifted) ^ c);
      p += 2 * len;
      n -= 3 * len;
    }
  }
  return crc_hw(crc, p, n);
}

const bool kHaveHw = __builtin_cpu_supports("sse4.2");
const bool kHaveClmul = kHaveHw && __builtin_cpu_supports("pclmul");

}  // namespace

uint32_t crc32c(uint32_t crc, std::span<const std::byte> data) {
  auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const size_t n = data.size();
  crc = ~crc;
  if (kHaveClmul && n >= 3 * kBlocks.back().len) {
    crc = crc_hw3(crc, p, n);
  } else if (kHaveHw) {
    crc = crc_hw(crc, p, n);
  } else {
    crc = crc_soft(crc, p, n);
  }
  return ~crc;
}

}  // namespace synclog::io
