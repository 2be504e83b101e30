#include "test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "segments/segment.h"
#include "sync/direct_sync.h"

namespace synclog::test {

TempDir::TempDir(const std::string& base) {
  static std::atomic<int> counter{0};
  path_ = std::filesystem::path(base) /
          ("synclog-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string disk_base() {
  const char* env = std::getenv("SYNCLOG_TEST_DISK_DIR");
  std::string base = env ? env : std::filesystem::current_path().string();
  return base;
}

std::string make_record(uint32_t thread, uint64_t seq, size_t size) {
  std::string s(size, '\0');
  uint64_t x = (uint64_t{thread} << 40) ^ (seq * 0x9e3779b97f4a7c15ull) ^ size;
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s[i] = static_cast<char>(x);
  }
  if (size >= 16) {
    std::memcpy(s.data(), &thread, 4);
    uint32_t sz = static_cast<uint32_t>(size);
    std::memcpy(s.data() + 4, &sz, 4);
    std::memcpy(s.data() + 8, &seq, 8);
  }
  return s;
}

bool check_record(std::string_view bytes, uint32_t* thread, uint64_t* seq) {
  if (bytes.size() < 16) return false;
  uint32_t sz;
  std::memcpy(thread, bytes.data(), 4);
  std::memcpy(&sz, bytes.data() + 4, 4);
  std::memcpy(seq, bytes.data() + 8, 8);
  return sz == bytes.size() && make_record(*thread, *seq, bytes.size()) == bytes;
}

std::vector<Replayed> read_all(const Log& log, Position from) {
  std::vector<Replayed> out;
  auto reader = log.read(from);
  EXPECT_TRUE(reader.has_value()) << reader.error().describe();
  if (!reader) return out;
  for (;;) {
    auto rec = reader->next();
    EXPECT_TRUE(rec.has_value()) << rec.error().describe();
    if (!rec || !*rec) break;
    out.push_back(Replayed{
        (*rec)->position,
        std::string(reinterpret_cast<const char*>((*rec)->data.data()), (*rec)->data.size())});
  }
  return out;
}

Result<std::vector<Replayed>> replay_all(const Config& config, RecoveryReport* report) {
  auto log = Log::open(config);
  if (!log) return std::unexpected(log.error());
  if (report) *report = (*log)->recovery();
  auto out = read_all(**log);
  if (auto r = (*log)->close(); !r) return std::unexpected(r.error());
  return out;
}

std::string backend_under_test() {
  const char* env = std::getenv("SYNCLOG_TEST_BACKEND");
  return env && *env ? env : "msync";
}

Config small_config(const std::filesystem::path& dir) {
  auto parsed = Config::parse("backend=" + backend_under_test());
  EXPECT_TRUE(parsed.has_value()) << parsed.error().describe();
  Config c = parsed.value_or(Config{});
  switch (c.backend) {
    case BackendKind::msync:
    case BackendKind::msync_pool:
      c.segment_kind = SegmentKind::mmap;
      break;
    case BackendKind::uring:
    case BackendKind::aio:
      c.segment_kind = SegmentKind::direct;
      break;
    case BackendKind::pwrite:
      c.segment_kind = SegmentKind::buffered;
      break;
    case BackendKind::auto_select:
      break;
  }
  c.sync_threads = 2;
  c.dir = dir;
  c.segment_size = 256 << 10;
  c.mode = SyncMode::batch;
  return c;
}

Files load_segments(const std::filesystem::path& dir) {
  Files out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    uint64_t id = 0;
    if (!seg::parse_segment_file_name(entry.path().filename().string(), &id)) continue;
    std::string& bytes = out[id];
    bytes.resize(static_cast<size_t>(std::filesystem::file_size(entry.path())));
    std::ifstream in(entry.path(), std::ios::binary);
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_EQ(in.gcount(), static_cast<std::streamsize>(bytes.size())) << entry.path();
  }
  return out;
}

void write_segments(const std::filesystem::path& dir, const Files& files) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const auto& [id, bytes] : files) {
    std::ofstream out(dir / seg::segment_file_name(id), std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
}

bool direct_writes_durable_at_completion(const Config& config) {
  auto choice = sync::choose_direct_sync(config);
  EXPECT_TRUE(choice.has_value()) << choice.error().describe();
  return choice && choice->use == DirectSync::dsync;
}

bool eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace synclog::test
