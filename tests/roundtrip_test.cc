#include <gtest/gtest.h>

#include "test_util.h"

namespace synclog::test {
namespace {

TEST(RoundTrip, SizesFromOneByteToOneMiBAcrossRollOvers) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.segment_size = 3 << 20;  // records may take up to half a segment
  std::vector<std::string> written;
  std::vector<Position> positions;
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    uint64_t seq = 0;
    for (int round = 0; round < 6; ++round) {
      for (size_t size : {size_t{1}, size_t{7}, size_t{8}, size_t{16}, size_t{100}, size_t{4096},
                          size_t{65536}, size_t{1} << 20}) {
        written.push_back(make_record(0, seq++, size));
        auto pos = (*log)->append(written.back());
        ASSERT_TRUE(pos.has_value()) << pos.error().describe();
        positions.push_back(*pos);
      }
    }
    ASSERT_TRUE((*log)->close().has_value());
  }
  EXPECT_GT(positions.back().segment(), positions.front().segment() + 1) << "no roll-over";
  auto replayed = replay_all(cfg);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  ASSERT_EQ(replayed->size(), written.size());
  for (size_t i = 0; i < written.size(); ++i) {
    EXPECT_EQ((*replayed)[i].data, written[i]) << "record " << i;
    EXPECT_EQ((*replayed)[i].position, positions[i]);
  }
}

TEST(RoundTrip, ReopenContinuesAfterTheOldRecords) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  std::vector<std::string> all;
  for (int session = 0; session < 4; ++session) {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    auto before = read_all(**log);
    ASSERT_EQ(before.size(), all.size()) << "session " << session;
    for (int i = 0; i < 500; ++i) {
      all.push_back(make_record(session, i, 100 + i));
      ASSERT_TRUE((*log)->append(all.back()).has_value());
    }
    auto now = read_all(**log);
    ASSERT_EQ(now.size(), all.size());
    for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(now[i].data, all[i]);
    ASSERT_TRUE((*log)->close().has_value());
  }
}

TEST(RoundTrip, ReadFromPositionSkipsEarlierRecords) {
  TempDir dir;
  auto log = Log::open(small_config(dir.path()));
  ASSERT_TRUE(log.has_value());
  std::vector<Position> pos;
  for (int i = 0; i < 3000; ++i) pos.push_back(*(*log)->append(make_record(1, i, 64)));
  auto tail = read_all(**log, pos[1234]);
  ASSERT_EQ(tail.size(), 3000u - 1234u);
  EXPECT_EQ(tail.front().position, pos[1234]);
}

}  // namespace
}  // namespace synclog::test
