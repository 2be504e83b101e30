// Opening a log takes no space: the session's first segment is taken by its
// first append. Open/close cycles without appends leave the directory as
// they found it, and a log at its max_total_size can still be opened, read
// and released from.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "segments/segment.h"
#include "test_util.h"

namespace synclog::test {
namespace {

struct DirUse {
  int segments = 0;
  uint64_t bytes = 0;
  uint64_t lowest = UINT64_MAX;
};

DirUse segment_files(const std::filesystem::path& dir) {
  DirUse u;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    uint64_t id = 0;
    if (!seg::parse_segment_file_name(e.path().filename().string(), &id)) continue;
    ++u.segments;
    u.bytes += e.file_size();
    u.lowest = std::min(u.lowest, id);
  }
  return u;
}

TEST(OpenClose, CyclesWithoutAppendsLeaveNoNewSegments) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  for (int i = 0; i < 5; ++i) {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    ASSERT_TRUE((*log)->sync().has_value());
    ASSERT_TRUE((*log)->close().has_value());
  }
  EXPECT_LE(segment_files(dir.path()).segments, 1);
  // Then with records in the log: more cycles add nothing and lose nothing.
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    for (int i = 0; i < 10; ++i) ASSERT_TRUE((*log)->append(make_record(0, i, 100)).has_value());
    ASSERT_TRUE((*log)->close().has_value());
  }
  const DirUse after_appends = segment_files(dir.path());
  EXPECT_EQ(after_appends.segments, 1);
  for (int i = 0; i < 5; ++i) {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    EXPECT_EQ(read_all(**log).size(), size_t{10});
    ASSERT_TRUE((*log)->close().has_value());
  }
  EXPECT_EQ(segment_files(dir.path()).segments, after_appends.segments);
  auto replayed = replay_all(cfg);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  ASSERT_EQ(replayed->size(), size_t{10});
  for (size_t i = 0; i < replayed->size(); ++i) {
    uint32_t t = 0;
    uint64_t seq = 0;
    ASSERT_TRUE(check_record((*replayed)[i].data, &t, &seq));
    EXPECT_EQ(seq, i);
  }
}

TEST(OpenClose, LogAtItsSizeLimitOpensAndReleases) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  int written = 0;
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    // About three segments' worth.
    for (; written < 60; ++written) {
      ASSERT_TRUE((*log)->append(make_record(0, written, 12 << 10)).has_value());
    }
    ASSERT_TRUE((*log)->close().has_value());
  }
  const DirUse full = segment_files(dir.path());
  ASSERT_GE(full.segments, 3);
  cfg.max_total_size = full.bytes;
  cfg.allocation_timeout = std::chrono::milliseconds(200);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  EXPECT_EQ(read_all(**log).size(), static_cast<size_t>(written));
  // Everything but the last segment goes; then appends have room again.
  const Position durable = (*log)->durable();
  ASSERT_TRUE((*log)->release_before(Position(durable.segment(), 0)).has_value());
  // (A spare made from a recycled file may be there already: ids only grow.)
  EXPECT_EQ(segment_files(dir.path()).lowest, durable.segment());
  for (int i = 0; i < 10; ++i) {
    auto pos = (*log)->append(make_record(0, written + i, 12 << 10));
    ASSERT_TRUE(pos.has_value()) << pos.error().describe();
  }
  ASSERT_TRUE((*log)->close().has_value());
  EXPECT_LE(segment_files(dir.path()).bytes, full.bytes);
}

}  // namespace
}  // namespace synclog::test
