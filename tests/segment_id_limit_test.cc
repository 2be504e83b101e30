// A Position keeps 32 bits of the segment id. A log whose ids approach that
// limit fails appends (and opens) clearly, naming the limit, instead of
// wrapping to positions that order before the log's start.
#include <gtest/gtest.h>

#include <fstream>
#include <vector>

#include "segments/format.h"
#include "segments/manager.h"
#include "segments/segment.h"
#include "test_util.h"

namespace synclog::test {
namespace {

// A segment file as a session that ended right after its session record
// leaves it: header, session record, zeros.
void write_segment(const Config& cfg, uint64_t id) {
  std::vector<std::byte> image(cfg.segment_size);
  seg::encode_header(seg::SegmentHeader{id, cfg.segment_size, 4096, 0x5eed5eed5eedull}, image);
  seg::encode_position_record(image, id, seg::kHeaderSize, seg::Kind::session, Position{});
  std::ofstream out(cfg.dir / seg::segment_file_name(id), std::ios::binary);
  out.write(reinterpret_cast<const char*>(image.data()),
            static_cast<std::streamsize>(image.size()));
  ASSERT_TRUE(out.good());
}

TEST(SegmentIdLimit, AppendsStopClearlyAtTheLastId) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  write_segment(cfg, seg::kMaxSegmentId - 1);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  std::vector<Position> acked;
  Result<Position> r = Position{};
  const std::string rec = make_record(0, 0, 16 << 10);
  for (int i = 0; i < 1000 && r; ++i) {
    r = (*log)->append(rec);
    if (r) acked.push_back(*r);
  }
  ASSERT_FALSE(r.has_value()) << "the log kept growing past segment id " << seg::kMaxSegmentId;
  EXPECT_EQ(r.error().code, Errc::no_space) << r.error().describe();
  EXPECT_NE(r.error().message.find("2^32-2"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(std::to_string(seg::kMaxSegmentId + 1)), std::string::npos)
      << r.error().message;
  ASSERT_FALSE(acked.empty());
  for (size_t i = 0; i < acked.size(); ++i) {
    EXPECT_EQ(acked[i].segment(), seg::kMaxSegmentId) << i;
    if (i > 0) {
      EXPECT_LT(acked[i - 1], acked[i]);
    }
  }
  ASSERT_TRUE((*log)->close().has_value());
  auto replayed = replay_all(cfg);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  ASSERT_EQ(replayed->size(), acked.size());
  for (size_t i = 0; i < acked.size(); ++i) EXPECT_EQ((*replayed)[i].position, acked[i]);
}

TEST(SegmentIdLimit, LogAtTheLastIdOpensButDoesNotGrow) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  write_segment(cfg, seg::kMaxSegmentId);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  auto r = (*log)->append("no segment id left for it");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::no_space) << r.error().describe();
  EXPECT_NE(r.error().message.find("2^32-2"), std::string::npos) << r.error().describe();
  EXPECT_TRUE((*log)->close().has_value());
}

TEST(SegmentIdLimit, IdPastTheLimitIsRefusedAtOpen) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  write_segment(cfg, seg::kMaxSegmentId + 1);
  auto log = Log::open(cfg);
  ASSERT_FALSE(log.has_value());
  EXPECT_NE(log.error().message.find("2^32-2"), std::string::npos) << log.error().describe();
}

}  // namespace
}  // namespace synclog::test
