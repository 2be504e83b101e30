// CRC32C (Castagnoli), hardware-accelerated with SSE4.2 where the CPU has it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace synclog::io {

// Extends `crc` (0 to start) over `data`. Chaining calls over consecutive
// pieces gives the same value as one call over their concatenation.
uint32_t crc32c(uint32_t crc, std::span<const std::byte> data);

}  // namespace synclog::io
