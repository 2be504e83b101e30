// Writes the seed corpus of segment_fuzz: small logs made by the real
// library (64 KiB segments), in the fuzz target's input format (segment
// files joined by SYNCLOG-FUZZ-NEXT-SEGMENT). Trailing zeros are cut off,
// so most seeds are truncated segments.
//
//   build/fuzz/tests/fuzz/segment_fuzz_corpus tests/fuzz/corpus
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "synclog/log.h"

namespace {

namespace fs = std::filesystem;
using namespace synclog;

constexpr std::string_view kNextSegment = "SYNCLOG-FUZZ-NEXT-SEGMENT";

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "make_corpus: %s\n", what.c_str());
  std::exit(1);
}

template <class T>
T check(Result<T> r, const char* what) {
  if (!r) die(std::string(what) + ": " + r.error().describe());
  return std::move(*r);
}
void check(Result<void> r, const char* what) {
  if (!r) die(std::string(what) + ": " + r.error().describe());
}

Config config(const fs::path& dir) {
  Config c;
  c.dir = dir;
  // mmap segments: the seeds are unpadded segments, as they were made when
  // msync was the default (direct segments would pad every sync).
  c.backend = BackendKind::msync;
  c.segment_kind = SegmentKind::mmap;
  c.segment_size = 64 << 10;
  c.mode = SyncMode::batch;
  return c;
}

std::string record(int i, size_t size) {
  std::string s(size, '\0');
  for (size_t k = 0; k < size; ++k) s[k] = static_cast<char>('a' + (i * 7 + k) % 26);
  return s;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Segment `id` of the log in `dir`, trailing zeros cut (kept 8-aligned).
std::string segment(const fs::path& dir, uint64_t id, bool trim = true) {
  char name[32];
  std::snprintf(name, sizeof name, "%020llu.seg", static_cast<unsigned long long>(id));
  std::string s = read_file(dir / name);
  if (s.empty()) die("no segment " + std::to_string(id) + " in " + dir.string());
  if (trim) {
    size_t end = s.size();
    while (end > 0 && s[end - 1] == '\0') --end;
    s.resize((end + 7) / 8 * 8);
  }
  return s;
}

void write_seed(const fs::path& out, const std::string& name,
                const std::vector<std::string>& segs) {
  std::string bytes;
  for (size_t i = 0; i < segs.size(); ++i) {
    if (i) bytes += kNextSegment;
    bytes += segs[i];
  }
  std::ofstream(out / name, std::ios::binary | std::ios::trunc) << bytes;
  std::printf("%-28s %7zu bytes, %zu segment(s)\n", name.c_str(), bytes.size(), segs.size());
}

struct Scratch {
  fs::path path;
  explicit Scratch(const std::string& name)
      : path(fs::path("/dev/shm") / ("synclog-corpus-" + name)) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Scratch() { fs::remove_all(path); }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) die("usage: segment_fuzz_corpus OUTPUT_DIR");
  const fs::path out = argv[1];
  fs::create_directories(out);

  {  // A few small records, closed cleanly: session, data, sync markers, end.
    Scratch s("clean");
    auto log = check(Log::open(config(s.path)), "open");
    for (int i = 0; i < 6; ++i) check(log->append(record(i, 1 + i * 13)), "append");
    check(log->close(), "close");
    write_seed(out, "clean_close", {segment(s.path, 1)});
  }
  {  // Not closed (no end record): what a crash leaves, marker last.
    Scratch s("open");
    auto log = check(Log::open(config(s.path)), "open");
    for (int i = 0; i < 5; ++i) check(log->append(record(i, 40)), "append");
    const std::string seg = segment(s.path, 1);
    write_seed(out, "crashed_open", {seg});
    // A torn tail: the last record half written.
    std::string torn = seg;
    torn.resize(torn.size() - 32);  // the 24-byte marker and 8 bytes of the record
    write_seed(out, "torn_tail", {torn});
    // A flipped byte in the middle of a record: damage before a marker.
    std::string flipped = seg;
    flipped[flipped.size() / 2] ^= 0x20;
    write_seed(out, "flipped_byte", {flipped});
    check(log->close(), "close");
  }
  {  // Two sessions: the second segment starts with a session record.
    Scratch s("sessions");
    {
      auto log = check(Log::open(config(s.path)), "open");
      for (int i = 0; i < 3; ++i) check(log->append(record(i, 100)), "append");
      check(log->close(), "close");
    }
    {
      auto log = check(Log::open(config(s.path)), "reopen");
      for (int i = 0; i < 3; ++i) check(log->append(record(10 + i, 50)), "append");
      check(log->close(), "close");
    }
    write_seed(out, "two_sessions", {segment(s.path, 1), segment(s.path, 2)});
  }
  {  // A full segment that ends with an end record, and the next one.
    Scratch s("full");
    auto log = check(Log::open(config(s.path)), "open");
    for (int i = 0;; ++i) {
      auto pos = check(log->append(record(i, 1500 + i % 700)), "append");
      if (pos.segment() >= 2) break;
    }
    check(log->close(), "close");
    write_seed(out, "segment_switch", {segment(s.path, 1, /*trim=*/false), segment(s.path, 2)});
  }
  {  // Empty records (version 4): alone, inside a batch, a batch of them only.
    Scratch s("empty");
    auto log = check(Log::open(config(s.path)), "open");
    check(log->append(std::string_view()), "append");
    check(log->append(record(1, 5)), "append");
    const std::string_view mixed[] = {"", "ab", ""};
    check(log->append_batch(mixed), "append_batch");
    const std::string_view none[] = {"", ""};
    check(log->append_batch(none), "append_batch");
    check(log->append(std::string_view()), "append");
    check(log->close(), "close");
    write_seed(out, "empty_records", {segment(s.path, 1)});
  }
  {  // A record in fragments (version 5): first in segment 2, last in 3.
    Scratch s("fragments");
    Config c = config(s.path);
    c.max_record = 100000;
    auto log = check(Log::open(c), "open");
    check(log->append(record(1, 30)), "append");
    check(log->append(record(2, 70000)), "append");
    check(log->append(record(3, 20)), "append");
    check(log->close(), "close");
    write_seed(out, "fragments", {segment(s.path, 1), segment(s.path, 2), segment(s.path, 3)});
  }
  {  // Transformed records (version 6): zstd and AES-256-GCM under the
     // fuzz target's key; a compressed batch (packed positions), a record
     // stored plain (random), an empty one.
    Scratch s("transformed");
    Config c = config(s.path);
    c.compression = Compression::zstd;
    c.encryption = Encryption::aes_256_gcm;
    c.encryption_keys = [](std::optional<uint32_t>) -> Result<EncryptionKey> {
      EncryptionKey k;
      k.id = 1;
      for (size_t i = 0; i < k.bytes.size(); ++i) k.bytes[i] = static_cast<std::byte>(0xa0 + i);
      return k;
    };
    auto log = check(Log::open(c), "open");
    check(log->append(std::string(300, 'a')), "append");
    const std::string_view batch[] = {"key1=value1", "key2=value2", "", "key3=value3"};
    check(log->append_batch(batch), "append_batch");
    check(log->append(record(2, 40)), "append");
    check(log->append(std::string_view()), "append");
    check(log->close(), "close");
    write_seed(out, "transformed", {segment(s.path, 1)});
  }
  {  // Compressed only (lz4): no key needed to read it.
    Scratch s("lz4");
    Config c = config(s.path);
    c.compression = Compression::lz4;
    auto log = check(Log::open(c), "open");
    check(log->append(std::string(500, 'b')), "append");
    const std::string_view batch[] = {"aaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaa"};
    check(log->append_batch(batch), "append_batch");
    check(log->close(), "close");
    write_seed(out, "compressed", {segment(s.path, 1)});
  }
  {  // The bare header of a fresh segment.
    Scratch s("header");
    auto log = check(Log::open(config(s.path)), "open");
    // Opening takes no segment: the first append does.
    check(log->append(record(1, 8)), "append");
    write_seed(out, "header_only", {segment(s.path, 1).substr(0, 64)});
    check(log->close(), "close");
  }
  return 0;
}
