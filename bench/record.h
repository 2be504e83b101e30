// The payload every bench writer appends, so verification can tell each
// record's origin and integrity without keeping a copy:
//
//   offset  size  field
//   0       4     magic "SLB1"
//   4       4     writer thread index
//   8       8     sequence number within that thread (0, 1, 2, ...)
//   16      4     total record length in bytes
//   20      4     check: a hash of thread, seq and length
//   24      n-32  the thread's pattern bytes [24, n-8)
//   n-8     8     seq again, xor kTrailerMix (catches a record spliced from two)
//
// The pattern is a fixed byte string per thread, so a writer only rewrites
// the 32 header and trailer bytes per record. Little-endian. Its content is
// the payload kind (--payload): `random` bytes that no compressor shrinks,
// or `text`, log lines built from a fixed vocabulary that compress like a
// service's log (docs/benchmarks.md has the grammar and measured ratios).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bench {

inline constexpr uint32_t kRecordMagic = 0x31424c53;  // "SLB1"
inline constexpr uint64_t kTrailerMix = 0x5a5a'c3c3'0f0f'9696ull;
inline constexpr size_t kMinRecordSize = 32;

enum class Payload { random, text };
const char* to_string(Payload p);
std::optional<Payload> parse_payload(std::string_view s);  // "random" | "text"

// Pattern bytes for thread `thread`, `size` bytes long; the same thread,
// size and kind always give the same bytes, so verification rebuilds them.
std::vector<std::byte> make_pattern(uint32_t thread, size_t size,
                                    Payload payload = Payload::random);

// Writes one record in place. `buf` holds the thread's pattern (at least
// `len` bytes); the previous call's trailer is undone first, so the pattern
// region is intact again.
class RecordWriter {
 public:
  RecordWriter(uint32_t thread, size_t max_len, Payload payload = Payload::random);
  std::span<const std::byte> next(uint64_t seq, size_t len);

 private:
  uint32_t thread_;
  std::vector<std::byte> pattern_;
  std::vector<std::byte> buf_;
  size_t last_len_ = 0;
};

struct ParsedRecord {
  uint32_t thread = 0;
  uint64_t seq = 0;
};

// Checks `data` against the layout above and `patterns[thread]` (each at
// least as long as the largest record). Returns an empty string and fills
// `out` if it is intact, else the reason.
std::string check_record(std::span<const std::byte> data,
                         const std::vector<std::vector<std::byte>>& patterns, ParsedRecord* out);

}  // namespace bench
