// A reader or tailer from a record's position starts at that record: it
// reads nothing of the segment before it (the rest of a segment can be
// hundreds of MiB). Any other position still gives the first record at or
// after it.
#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "segments/segment.h"
#include "test_util.h"

namespace synclog::test {
namespace {

// Records every read of one segment file: the offsets it started at.
class ReadLog final : public io::Hook {
 public:
  explicit ReadLog(std::filesystem::path file) : file_(std::move(file)) {}
  int access(const io::Event& e) override {
    if (e.op == io::Op::read && e.path == file_) {
      std::lock_guard lock(mu_);
      offsets_.push_back(e.offset);
    }
    return 0;
  }
  void clear() {
    std::lock_guard lock(mu_);
    offsets_.clear();
  }
  std::vector<uint64_t> offsets() {
    std::lock_guard lock(mu_);
    return offsets_;
  }

 private:
  const std::filesystem::path file_;
  std::mutex mu_;
  std::vector<uint64_t> offsets_;
};

struct Written {
  std::vector<Position> positions;
  Position middle;  // a record about halfway through the first full segment
  size_t middle_index = 0;
};

Written write_log(const Config& cfg) {
  Written w;
  auto log = Log::open(cfg);
  EXPECT_TRUE(log.has_value()) << log.error().describe();
  for (uint64_t i = 0;
       w.positions.empty() || w.positions.back().segment() < w.positions.front().segment() + 2;
       ++i) {
    auto p = (*log)->append(make_record(0, i, 3000));
    EXPECT_TRUE(p.has_value()) << p.error().describe();
    w.positions.push_back(*p);
  }
  for (size_t k = 0; k < w.positions.size(); ++k) {
    if (w.positions[k].segment() == w.positions.front().segment() &&
        w.positions[k].offset() <= cfg.segment_size / 2) {
      w.middle = w.positions[k];
      w.middle_index = k;
    }
  }
  EXPECT_TRUE((*log)->close().has_value());
  return w;
}

Config config_in(const std::filesystem::path& dir) {
  Config cfg = small_config(dir);
  cfg.segment_size = 4u << 20;
  cfg.mode = SyncMode::periodic;
  return cfg;
}

std::filesystem::path file_of(const Config& cfg, Position p) {
  return cfg.dir / seg::segment_file_name(p.segment());
}

TEST(ReaderPosition, StartsAtTheRecordWithoutReadingTheSegmentBeforeIt) {
  TempDir dir;
  const Config cfg = config_in(dir.path());
  const Written w = write_log(cfg);
  ASSERT_GT(w.middle.offset(), 1u << 20);
  // Installed before the log opens and removed after it closes (its
  // threads may call it until then); what the open read does not count.
  ReadLog reads(file_of(cfg, w.middle));
  HookGuard guard(&reads);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  reads.clear();
  auto reader = (*log)->read(w.middle);
  ASSERT_TRUE(reader.has_value());
  for (size_t k = w.middle_index; k < w.positions.size(); ++k) {
    auto rec = reader->next();
    ASSERT_TRUE(rec.has_value()) << rec.error().describe();
    ASSERT_TRUE(rec->has_value()) << "ended before record " << k;
    ASSERT_EQ((*rec)->position, w.positions[k]);
  }
  auto end = reader->next();
  ASSERT_TRUE(end.has_value() && !end->has_value());
  ASSERT_FALSE(reads.offsets().empty());
  // Besides the 64-byte header (is the segment encrypted?), nothing before it.
  for (uint64_t off : reads.offsets()) {
    if (off != 0) {
      EXPECT_GE(off, w.middle.offset());
    }
  }
}

TEST(ReaderPosition, ATailerStartsThereToo) {
  TempDir dir;
  const Config cfg = config_in(dir.path());
  const Written w = write_log(cfg);
  ReadLog reads(file_of(cfg, w.middle));
  HookGuard guard(&reads);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  reads.clear();
  auto tailer = (*log)->tail(w.middle);
  ASSERT_TRUE(tailer.has_value());
  auto rec = tailer->next(std::chrono::seconds(5));
  ASSERT_TRUE(rec.has_value() && rec->has_value());
  EXPECT_EQ((*rec)->position, w.middle);
  // Besides the 64-byte header (is the segment encrypted?), nothing before it.
  for (uint64_t off : reads.offsets()) {
    if (off != 0) {
      EXPECT_GE(off, w.middle.offset());
    }
  }
}

TEST(ReaderPosition, APositionInsideARecordGivesTheNextRecord) {
  TempDir dir;
  const Config cfg = config_in(dir.path());
  const Written w = write_log(cfg);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  for (uint32_t into : {1u, 8u, 16u, 2048u}) {
    const Position inside(w.middle.segment(), w.middle.offset() + into);
    auto reader = (*log)->read(inside);
    ASSERT_TRUE(reader.has_value());
    auto rec = reader->next();
    ASSERT_TRUE(rec.has_value() && rec->has_value()) << into;
    EXPECT_EQ((*rec)->position, w.positions[w.middle_index + 1]) << into;
  }
}

// A position whose segment was released: its records are gone, so reading
// from there is Errc::released, never a silent start at the oldest record
// left (a replica resuming from it would lose records without knowing).
// Reopened too: the log then knows only that the segment is below its
// oldest one.
TEST(ReaderPosition, AReleasedPositionIsAnError) {
  TempDir dir;
  const Config cfg = config_in(dir.path());
  const Written w = write_log(cfg);
  const Position gone = w.middle;
  const Position kept = w.positions.back();
  for (int session = 0; session < 2; ++session) {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    if (session == 0) {
      auto released = (*log)->release_before(Position(gone.segment() + 1, 0));
      ASSERT_TRUE(released.has_value()) << released.error().describe();
      ASSERT_FALSE(released->ids.empty());
    }
    auto reader = (*log)->read(gone);
    ASSERT_FALSE(reader.has_value()) << "read(" << gone.to_string() << ") of a released segment";
    EXPECT_EQ(reader.error().code, Errc::released) << reader.error().describe();
    auto tailer = (*log)->tail(gone);
    ASSERT_FALSE(tailer.has_value()) << "tail(" << gone.to_string() << ") of a released segment";
    EXPECT_EQ(tailer.error().code, Errc::released) << tailer.error().describe();
    // What is still held reads as before, and so does "from the start".
    auto from_kept = (*log)->read(kept);
    ASSERT_TRUE(from_kept.has_value()) << from_kept.error().describe();
    auto rec = from_kept->next();
    ASSERT_TRUE(rec.has_value() && rec->has_value());
    EXPECT_EQ((*rec)->position, kept);
    ASSERT_TRUE((*log)->read().has_value());
    ASSERT_TRUE((*log)->tail().has_value());
    ASSERT_TRUE((*log)->close().has_value());
  }
}

}  // namespace
}  // namespace synclog::test
