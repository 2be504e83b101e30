#include "record.h"

#include <array>
#include <cstdio>
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

// The text payload's grammar (docs/benchmarks.md, "Payloads"): lines of
//   2026-12-04T10:00:00.000000Z LEVEL svc=S op=O key=K/NNNNNN status=C dur_us=D bytes=B\n
// with every word drawn from the tables below by a splitmix64 stream seeded
// with the thread index, and time moving forward 1-4000 us per line, so
// lines share their structure and words but not their numbers.
constexpr std::array<const char*, 7> kLevels = {"INFO", "INFO",  "INFO", "INFO",
                                                "WARN", "DEBUG", "ERROR"};
constexpr std::array<const char*, 8> kServices = {"api",    "ingest", "billing", "auth",
                                                  "search", "cache",  "gateway", "scheduler"};
constexpr std::array<const char*, 6> kOps = {"get", "put", "delete", "scan", "commit", "lookup"};
constexpr std::array<const char*, 5> kKeys = {"users", "orders", "items", "sessions", "carts"};
constexpr std::array<int, 10> kStatus = {200, 200, 200, 200, 201, 204, 304, 404, 409, 500};

std::vector<std::byte> make_text(uint32_t thread, size_t size) {
  std::string text;
  text.reserve(size + 160);
  uint64_t state = 0x7465'7874'0000'0000ull ^ thread;  // "text"
  auto next = [&state] { return splitmix(state++); };
  uint64_t us = (10 * 3600 + uint64_t{thread} * 60) * 1'000'000;  // 10:00 + thread minutes
  char line[192];
  while (text.size() < size) {
    us += 1 + next() % 4000;
    const uint64_t s = us / 1'000'000;
    const int n = std::snprintf(
        line, sizeof line,
        "2026-12-04T%02llu:%02llu:%02llu.%06lluZ %s svc=%s op=%s key=%s/%06llu status=%d "
        "dur_us=%llu bytes=%llu\n",
        static_cast<unsigned long long>(s / 3600 % 24),
        static_cast<unsigned long long>(s / 60 % 60), static_cast<unsigned long long>(s % 60),
        static_cast<unsigned long long>(us % 1'000'000), kLevels[next() % kLevels.size()],
        kServices[next() % kServices.size()], kOps[next() % kOps.size()],
        kKeys[next() % kKeys.size()], static_cast<unsigned long long>(next() % 1'000'000),
        kStatus[next() % kStatus.size()], static_cast<unsigned long long>(next() % 5000),
        static_cast<unsigned long long>(next() % 65536));
    text.append(line, static_cast<size_t>(n));
  }
  std::vector<std::byte> p(size);
  std::memcpy(p.data(), text.data(), size);
  return p;
}

}  // namespace

const char* to_string(Payload p) { return p == Payload::text ? "text" : "random"; }

std::optional<Payload> parse_payload(std::string_view s) {
  if (s == "random") return Payload::random;
  if (s == "text") return Payload::text;
  return std::nullopt;
}

std::vector<std::byte> make_pattern(uint32_t thread, size_t size, Payload payload) {
  if (payload == Payload::text) return make_text(thread, size);
  std::vector<std::byte> p((size + 7) & ~size_t{7});
  for (size_t i = 0; i < p.size(); i += 8)
    put(p.data() + i, splitmix((uint64_t{thread} << 32) + i));
  p.resize(size);
  return p;
}

RecordWriter::RecordWriter(uint32_t thread, size_t max_len, Payload payload)
    : thread_(thread), pattern_(make_pattern(thread, max_len, payload)), buf_(pattern_) {}

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
