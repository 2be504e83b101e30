// libFuzzer target over segment parsing, recovery and replay (G3, G6: any
// bytes in a log directory give a clear error or a replay, never a crash,
// a hang or a leak).
//
// The input is one to three segment files, separated by kNextSegment
// (tests/fuzz/segment.dict holds it): they are written as segments 1, 2, 3
// of a fresh log directory under /dev/shm. For each recovery mode the
// directory is laid anew, opened with Log::open, replayed to the end with
// the Reader and closed; a log that opened with tolerate_torn_tail or
// point_in_time is then opened again and must replay exactly the same
// records (recovery after recovery is stable). The log has a key source
// (fuzz_key), so encrypted and compressed records (format version 6) are
// decrypted and decompressed like any others. The raw bytes also go
// through seg::decode_header and seg::decode_record at every aligned offset.
//
// Build: cmake --preset fuzz && cmake --build --preset fuzz
// Run:   build/fuzz/tests/fuzz/segment_fuzz -dict=tests/fuzz/segment.dict CORPUS_COPY_DIR
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "segments/format.h"
#include "synclog/log.h"

namespace {

namespace fs = std::filesystem;
using synclog::Config;
using synclog::Log;
using synclog::RecoveryMode;

constexpr std::string_view kNextSegment = "SYNCLOG-FUZZ-NEXT-SEGMENT";
constexpr size_t kMaxSegments = 3;
constexpr uint64_t kSegmentSize = 64 << 10;  // the smallest segment_size Config accepts

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "segment_fuzz: %s\n", what.c_str());
  std::abort();
}

const fs::path& work_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::path("/dev/shm") / ("synclog-fuzz-" + std::to_string(::getpid()));
    std::error_code ec;
    fs::remove_all(d, ec);
    return d;
  }();
  return dir;
}

std::vector<std::string_view> split(std::string_view in) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < kMaxSegments) {
    const size_t at = in.find(kNextSegment);
    if (at == std::string_view::npos) break;
    parts.push_back(in.substr(0, at));
    in.remove_prefix(at + kNextSegment.size());
  }
  parts.push_back(in);
  return parts;
}

std::string segment_file_name(uint64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%020llu.seg", static_cast<unsigned long long>(id));
  return buf;
}

void lay_out(const std::vector<std::string_view>& parts) {
  const fs::path& dir = work_dir();
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  for (size_t i = 0; i < parts.size(); ++i) {
    std::ofstream f(dir / segment_file_name(i + 1), std::ios::binary | std::ios::trunc);
    f.write(parts[i].data(), static_cast<std::streamsize>(parts[i].size()));
    if (!f) fail("cannot write " + (dir / segment_file_name(i + 1)).string());
  }
}

struct Replay {
  std::vector<std::pair<uint64_t, std::string>> records;  // position, bytes
  std::optional<std::string> error;
};

Replay replay(const Log& log) {
  Replay out;
  auto reader = log.read();
  if (!reader) {
    out.error = reader.error().describe();
    return out;
  }
  // A record in fragments (format version 5) may be larger than this
  // config's limit (an earlier session's max_record), never above 1 GiB.
  const uint64_t max = uint64_t{1} << 30;
  for (;;) {
    auto rec = reader->next();
    if (!rec) {
      out.error = rec.error().describe();
      return out;
    }
    if (!*rec) return out;
    const auto& r = **rec;
    // Empty records are records (format version 4); only too large is impossible.
    if (r.data.size() > max) fail("replay returned a record of impossible size");
    if (!out.records.empty() && r.position.raw() <= out.records.back().first) {
      fail("replay went backwards at " + r.position.to_string());
    }
    out.records.emplace_back(
        r.position.raw(), std::string(reinterpret_cast<const char*>(r.data.data()), r.data.size()));
  }
}

// The key of the seeds with encrypted records (make_corpus.cc has the same):
// with it, fuzzed encrypted records reach authentication and decompression.
synclog::Result<synclog::EncryptionKey> fuzz_key(std::optional<uint32_t> id) {
  synclog::EncryptionKey k;
  k.id = 1;
  for (size_t i = 0; i < k.bytes.size(); ++i) k.bytes[i] = static_cast<std::byte>(0xa0 + i);
  if (id && *id != k.id) {
    return synclog::make_error(synclog::Errc::invalid_config, "no such fuzz key");
  }
  return k;
}

Config config(RecoveryMode mode) {
  Config c;
  c.encryption = synclog::Encryption::aes_256_gcm;
  c.encryption_keys = fuzz_key;
  c.dir = work_dir();
  c.backend = synclog::BackendKind::msync;
  c.segment_kind = synclog::SegmentKind::mmap;
  c.mode = synclog::SyncMode::batch;
  c.segment_size = kSegmentSize;
  c.recovery = mode;
  c.allocation_timeout = std::chrono::milliseconds(1000);
  c.prezero = false;  // faster new segments; the format does not depend on it
  return c;
}

void open_and_replay(const std::vector<std::string_view>& parts, RecoveryMode mode) {
  lay_out(parts);
  const Config cfg = config(mode);
  Replay first;
  {
    auto log = Log::open(cfg);
    if (!log) {
      // A refusal must say why.
      if (log.error().message.empty()) fail("Log::open failed without a message");
      return;
    }
    first = replay(**log);
    (void)(*log)->close();
  }
  if ((mode != RecoveryMode::tolerate_torn_tail && mode != RecoveryMode::point_in_time) ||
      first.error) {
    return;
  }
  // The first open ended the log and started a session after it: a second
  // recovery must find the same records.
  auto again = Log::open(cfg);
  if (!again) fail("a log that opened once does not open again: " + again.error().describe());
  Replay second = replay(**again);
  (void)(*again)->close();
  if (second.error) fail("second replay failed: " + *second.error);
  if (second.records != first.records) {
    fail("second recovery replays " + std::to_string(second.records.size()) +
         " records, the first " + std::to_string(first.records.size()));
  }
}

void decode_raw(std::span<const std::byte> bytes) {
  (void)synclog::seg::decode_header(bytes);
  for (uint64_t id : {uint64_t{1}, uint64_t{2}}) {
    for (size_t off = 0; off + synclog::seg::kRecordHeaderSize <= bytes.size();
         off += synclog::seg::kAlign) {
      const auto d = synclog::seg::decode_record(bytes, id, static_cast<uint32_t>(off));
      if (d.status == synclog::seg::Decode::ok) {
        const auto& r = d.record;
        if (r.offset != off || r.framed < synclog::seg::kRecordHeaderSize ||
            r.framed % synclog::seg::kAlign != 0 || off + r.framed > bytes.size() ||
            r.payload.data() != bytes.data() + off + synclog::seg::kRecordHeaderSize) {
          fail("decode_record returned an inconsistent view at offset " + std::to_string(off));
        }
        (void)r.position_payload();
      } else if (d.status == synclog::seg::Decode::bad && d.reason == nullptr) {
        fail("decode_record rejected a record without a reason");
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  decode_raw(std::as_bytes(std::span(data, size)));
  const auto parts = split(in);
  for (auto mode : {RecoveryMode::tolerate_torn_tail, RecoveryMode::point_in_time,
                    RecoveryMode::absolute, RecoveryMode::skip_damaged}) {
    open_and_replay(parts, mode);
  }
  std::error_code ec;
  fs::remove_all(work_dir(), ec);
  return 0;
}
