// Helpers shared by the tests: scratch directories, record payloads that
// carry their own identity, and whole-log replay.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "io/hook.h"
#include "synclog/log.h"

namespace synclog {
// gtest prints positions in failed assertions as "segment:offset".
inline void PrintTo(const Position& p, std::ostream* os) { *os << p.to_string(); }
}  // namespace synclog

namespace synclog::test {

// Sanitizer builds run 5-15x slower. Loops that build confidence by volume
// run a fifth as many rounds there; each round checks the same property.
// GCC defines __SANITIZE_*__; clang may only answer __has_feature.
#if defined(__has_feature)
#define SYNCLOG_HAS_FEATURE(x) __has_feature(x)
#else
#define SYNCLOG_HAS_FEATURE(x) 0
#endif
#if defined(__SANITIZE_THREAD__) || SYNCLOG_HAS_FEATURE(thread_sanitizer)
inline constexpr bool kThreadSanitized = true;
#else
inline constexpr bool kThreadSanitized = false;
#endif
#if defined(__SANITIZE_ADDRESS__) || SYNCLOG_HAS_FEATURE(address_sanitizer) || \
    SYNCLOG_HAS_FEATURE(memory_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = kThreadSanitized;
#endif
#undef SYNCLOG_HAS_FEATURE
constexpr int scaled(int n) { return kSanitized ? (n / 5 > 0 ? n / 5 : 1) : n; }

// Installs an I/O hook (fault injection, crash recording) for a scope.
class HookGuard {
 public:
  explicit HookGuard(io::Hook* h) { io::install_hook(h); }
  ~HookGuard() { io::install_hook(nullptr); }
  HookGuard(const HookGuard&) = delete;
  HookGuard& operator=(const HookGuard&) = delete;
};

// A fresh empty directory, removed when the object goes away. `base` picks
// the medium: /dev/shm for speed, the build tree for a real disk.
class TempDir {
 public:
  explicit TempDir(const std::string& base = "/dev/shm");
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Where disk-backed tests put their logs (under the build tree).
std::string disk_base();

// A record of `size` bytes whose contents are derived from (thread, seq),
// so a replayed record can be checked without keeping a copy.
std::string make_record(uint32_t thread, uint64_t seq, size_t size);
// Parses a record made by make_record; false if the bytes do not match it.
bool check_record(std::string_view bytes, uint32_t* thread, uint64_t* seq);

struct Replayed {
  Position position;
  std::string data;
};

// Whether `got` holds exactly `want` (anything with a position and data),
// in order; a failure names the first difference.
template <class Want>
testing::AssertionResult same_records(const std::vector<Replayed>& got,
                                      const std::vector<Want>& want) {
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (got[i].position != want[i].position || got[i].data != want[i].data) {
      return testing::AssertionFailure()
             << "record " << i << ": got " << got[i].data.size() << " bytes at "
             << got[i].position.to_string() << ", want " << want[i].data.size() << " bytes at "
             << want[i].position.to_string()
             << (got[i].data == want[i].data ? " (same bytes)" : " (different bytes)");
    }
  }
  if (got.size() != want.size()) {
    return testing::AssertionFailure()
           << "got " << got.size() << " records, want " << want.size()
           << (got.size() > want.size()
                   ? "; first extra at " + got[want.size()].position.to_string()
                   : "; first missing at " + want[got.size()].position.to_string());
  }
  return testing::AssertionSuccess();
}

// Opens the log (config.dir), replays every record, closes it.
Result<std::vector<Replayed>> replay_all(const Config& config, RecoveryReport* report = nullptr);
// Replays from an open log.
std::vector<Replayed> read_all(const Log& log, Position from = {});

// The backend the suite runs against: $SYNCLOG_TEST_BACKEND (CTest runs
// every backend-dependent test once per backend), default msync.
std::string backend_under_test();
// A config for tests: 256 KiB segments, batch mode, the backend under test
// with its segment kind.
Config small_config(const std::filesystem::path& dir);

// Whether a log opened with `config` (its dir must exist) makes a direct
// write durable when the write completes: direct_sync resolved for the
// filesystem of config.dir as Log::open resolves it.
bool direct_writes_durable_at_completion(const Config& config);

// The segment files of a log directory (id -> bytes), and a fresh directory
// holding exactly such a set: for tests that damage copies of a log.
using Files = std::map<uint64_t, std::string>;
Files load_segments(const std::filesystem::path& dir);

// Polls `done` every 10 ms until it holds (true) or 20 s pass (false): for
// what a background thread of the log does, never as a time limit.
bool eventually(const std::function<bool()>& done);
void write_segments(const std::filesystem::path& dir, const Files& files);

}  // namespace synclog::test
