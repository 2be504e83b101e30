#include "record.h"

#include <cstring>

namespace bench {
namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint32_t check_of(uint32_t thread, uint64_t seq, uint32_t len) {
  return static_cast<uint32_t>(splitmix(seq ^ (uint64_t{thread} << 40) ^ (uint64_t{len} << 20)));
}

template <class T>
void put(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof v);
}
template <class T>
T get(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

std::vector<std::byte> make_pattern(uint32_t thread, size_t size) {
  std::vector<std::byte> p((size + 7) & ~size_t{7});
  for (size_t i = 0; i < p.size(); i += 8)
    put(p.data() + i, splitmix((uint64_t{thread} << 32) + i));
  p.resize(size);
  return p;
}

RecordWriter::RecordWriter(uint32_t thread, size_t max_len)
    : thread_(thread), pattern_(make_pattern(thread, max_len)), buf_(pattern_) {}

std::span<const std::byte> RecordWriter::next(uint64_t seq, size_t len) {
  if (last_len_ != 0) std::memcpy(&buf_[last_len_ - 8], &pattern_[last_len_ - 8], 8);
  std::byte* p = buf_.data();
  put<uint32_t>(p, kRecordMagic);
  put<uint32_t>(p + 4, thread_);
  put<uint64_t>(p + 8, seq);
  put<uint32_t>(p + 16, static_cast<uint32_t>(len));
  put<uint32_t>(p + 20, check_of(thread_, seq, static_cast<uint32_t>(len)));
  put<uint64_t>(p + len - 8, seq ^ kTrailerMix);
  last_len_ = len;
  return {p, len};
}

std::string check_record(std::span<const std::byte> data,
                         const std::vector<std::vector<std::byte>>& patterns, ParsedRecord* out) {
  const size_t n = data.size();
  if (n < kMinRecordSize) return "record of " + std::to_string(n) + " bytes is too short";
  const std::byte* p = data.data();
  if (get<uint32_t>(p) != kRecordMagic) return "bad magic (not a bench record)";
  const auto thread = get<uint32_t>(p + 4);
  const auto seq = get<uint64_t>(p + 8);
  const auto len = get<uint32_t>(p + 16);
  if (len != n) {
    return "length field " + std::to_string(len) + " but the log returned " + std::to_string(n) +
           " bytes";
  }
  if (get<uint32_t>(p + 20) != check_of(thread, seq, len)) return "header check mismatch";
  if (thread >= patterns.size()) return "writer thread " + std::to_string(thread) + " out of range";
  if (get<uint64_t>(p + n - 8) != (seq ^ kTrailerMix)) {
    return "trailer does not match seq " + std::to_string(seq);
  }
  const auto& pat = patterns[thread];
  if (pat.size() < n || std::memcmp(p + 24, pat.data() + 24, n - 32) != 0) {
    return "payload bytes differ from the pattern";
  }
  out->thread = thread;
  out->seq = seq;
  return {};
}

}  // namespace bench
