// Log::segments(), disk_bytes(), oldest() and the report of release_before,
// checked against the directory itself (stat of every file) and against
// the positions append() returned, within a session and across reopens.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "test_util.h"

namespace synclog::test {
namespace {

namespace fs = std::filesystem;

// Every segment file in the directory (log segments, spares, files waiting
// to be recycled), by name, with its size as stat says.
std::map<std::string, uint64_t> files_on_disk(const fs::path& dir) {
  std::map<std::string, uint64_t> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!name.ends_with(".seg") && !name.ends_with(".recycle.tmp")) continue;
    struct stat st;
    EXPECT_EQ(::stat(e.path().c_str(), &st), 0) << e.path();
    out[name] = static_cast<uint64_t>(st.st_size);
  }
  return out;
}

std::map<std::string, uint64_t> files_listed(const std::vector<SegmentInfo>& segs) {
  std::map<std::string, uint64_t> out;
  for (const auto& s : segs) out[s.path.filename().string()] = s.bytes;
  return out;
}

// The listing once the manager is idle: a spare being made is a temporary
// file until it is ready, so the listing and the directory agree only
// between spares. Fails the test if they never agree.
std::vector<SegmentInfo> settled(const Log& log) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    auto segs = log.segments();
    EXPECT_TRUE(segs.has_value()) << segs.error().describe();
    if (!segs) return {};
    size_t spares = 0;
    for (const auto& s : *segs) spares += s.state == SegmentState::spare;
    const bool full = spares == log.config().spare_segments;
    if (full && files_listed(*segs) == files_on_disk(log.config().dir)) return *segs;
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "segments() never matched the directory";
      return *segs;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// First and last position append() returned, per segment id.
using Bounds = std::map<uint64_t, std::pair<Position, Position>>;
void note(Bounds& b, Position p) {
  auto [it, fresh] = b.try_emplace(p.segment(), p, p);
  if (!fresh) it->second.second = p;
}

Bounds append_n(Log& log, uint64_t n, uint64_t seq0, std::vector<Position>* all = nullptr) {
  Bounds b;
  for (uint64_t i = 0; i < n; ++i) {
    auto pos = log.append(make_record(1, seq0 + i, 2000));
    EXPECT_TRUE(pos.has_value()) << pos.error().describe();
    if (!pos) break;
    note(b, *pos);
    if (all) all->push_back(*pos);
  }
  return b;
}

uint64_t sum_bytes(const std::map<std::string, uint64_t>& files) {
  uint64_t n = 0;
  for (const auto& [name, size] : files) n += size;
  return n;
}

// What segments() says about the log's segments, against the model.
void expect_bounds(const std::vector<SegmentInfo>& segs, const Bounds& want) {
  size_t in_log = 0;
  for (const auto& s : segs) {
    if (s.state == SegmentState::spare || s.state == SegmentState::recycling) {
      EXPECT_FALSE(s.first.has_value()) << s.id;
      continue;
    }
    ++in_log;
    auto it = want.find(s.id);
    if (it == want.end()) {
      EXPECT_FALSE(s.first.has_value()) << "segment " << s.id << " holds no record";
      EXPECT_FALSE(s.last.has_value()) << "segment " << s.id << " holds no record";
      continue;
    }
    EXPECT_EQ(s.first, it->second.first) << "segment " << s.id;
    EXPECT_EQ(s.last, it->second.second) << "segment " << s.id;
  }
  EXPECT_GE(in_log, want.size());
}

TEST(Space, SegmentsMatchTheDirectoryAndTheAppendedPositions) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.spare_segments = 2;
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  std::vector<Position> all;
  const Bounds want = append_n(**log, 400, 0, &all);  // about 3 segments of 256 KiB
  ASSERT_GE(want.size(), 3u);

  const auto segs = settled(**log);
  expect_bounds(segs, want);
  const auto disk = files_on_disk(cfg.dir);
  EXPECT_EQ(files_listed(segs), disk);
  EXPECT_EQ((*log)->disk_bytes(), sum_bytes(disk));

  // Log segments first, ascending, the newest active and the rest
  // releasable (the durable position is in the newest); then two spares.
  std::vector<uint64_t> log_ids;
  size_t spares = 0;
  for (const auto& s : segs) {
    EXPECT_EQ(s.path.parent_path(), cfg.dir);
    if (s.state == SegmentState::spare) {
      ++spares;
      EXPECT_GT(s.id, want.rbegin()->first);
      continue;
    }
    EXPECT_EQ(spares, 0u) << "a log segment listed after a spare";
    log_ids.push_back(s.id);
  }
  EXPECT_EQ(spares, 2u);
  ASSERT_FALSE(log_ids.empty());
  EXPECT_TRUE(std::is_sorted(log_ids.begin(), log_ids.end()));
  EXPECT_EQ(log_ids.back(), want.rbegin()->first);
  for (const auto& s : segs) {
    if (s.state == SegmentState::spare) continue;
    const auto expected = s.id == log_ids.back() ? SegmentState::active : SegmentState::releasable;
    EXPECT_EQ(s.state, expected) << "segment " << s.id << " is " << to_string(s.state);
  }

  auto oldest = (*log)->oldest();
  ASSERT_TRUE(oldest.has_value()) << oldest.error().describe();
  EXPECT_EQ(*oldest, all.front());

  const Stats st = (*log)->stats();
  EXPECT_EQ(st.disk_bytes, sum_bytes(disk));
  EXPECT_EQ(st.segment_files, log_ids.size());
  EXPECT_EQ(st.spare_files, 2u);
  EXPECT_EQ(st.durable, (*log)->durable());
  EXPECT_GT(st.durable, all.back());
  ASSERT_TRUE((*log)->close().has_value());
}

TEST(Space, BoundsFollowEachAppend) {
  TempDir dir;
  auto log = Log::open(small_config(dir.path()));
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  auto empty = (*log)->oldest();
  ASSERT_TRUE(empty.has_value());
  EXPECT_FALSE(empty->has_value()) << "an empty log has no oldest record";
  Bounds want;
  for (uint64_t i = 0; i < 300; ++i) {
    auto pos = (*log)->append(make_record(2, i, 1500));
    ASSERT_TRUE(pos.has_value()) << pos.error().describe();
    note(want, *pos);
    if (i % 23 != 0) continue;
    auto segs = (*log)->segments();
    ASSERT_TRUE(segs.has_value()) << segs.error().describe();
    expect_bounds(*segs, want);
  }
  auto segs = (*log)->segments();
  ASSERT_TRUE(segs.has_value());
  expect_bounds(*segs, want);
}

void release_reports_what_left_the_disk(bool recycle) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.recycle = recycle;
  cfg.spare_segments = 1;
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  std::vector<Position> all;
  const Bounds want = append_n(**log, 500, 0, &all);
  ASSERT_GE(want.size(), 4u);
  const auto before_segs = settled(**log);
  const auto before = files_on_disk(cfg.dir);

  // Up to (not into) the third segment that holds records.
  const uint64_t cut_segment = std::next(want.begin(), 2)->first;
  const Position cut = std::next(want.begin(), 2)->second.first;
  std::vector<uint64_t> going;
  uint64_t going_bytes = 0;
  for (const auto& s : before_segs) {
    if (s.state != SegmentState::spare && s.id < cut_segment) {
      going.push_back(s.id);
      going_bytes += s.bytes;
    }
  }
  ASSERT_GE(going.size(), 2u);

  auto report = (*log)->release_before(cut);
  ASSERT_TRUE(report.has_value()) << report.error().describe();
  EXPECT_EQ(report->ids, going);
  EXPECT_EQ(report->deleted + report->recycled, going.size());
  EXPECT_EQ(report->bytes_deleted + report->bytes_recycled, going_bytes);
  if (recycle) {
    EXPECT_EQ(report->recycled, 1u) << "room for one file beside the one spare";
  } else {
    EXPECT_EQ(report->recycled, 0u);
    EXPECT_EQ(report->bytes_recycled, 0u);
  }
  EXPECT_EQ(report->oldest, cut);

  // Gone from their names; what was deleted left the disk, what is
  // recycled is still there (a spare, or waiting to become one).
  const auto after = files_on_disk(cfg.dir);
  for (uint64_t id : going) {
    const std::string name = [&] {
      for (const auto& s : before_segs)
        if (s.id == id) return s.path.filename().string();
      return std::string();
    }();
    EXPECT_FALSE(after.contains(name)) << name << " is still on disk";
  }
  EXPECT_EQ(sum_bytes(before) - sum_bytes(after), report->bytes_deleted);
  const auto segs = settled(**log);
  EXPECT_EQ(files_listed(segs), files_on_disk(cfg.dir));
  EXPECT_EQ((*log)->disk_bytes(), sum_bytes(before) - report->bytes_deleted);
  Bounds left;
  for (const auto& [id, b] : want)
    if (id >= cut_segment) left[id] = b;
  expect_bounds(segs, left);
  auto oldest = (*log)->oldest();
  ASSERT_TRUE(oldest.has_value());
  EXPECT_EQ(*oldest, cut);
  EXPECT_EQ(read_all(**log).front().position, cut);

  // Nothing more to let go: an empty report, not an error.
  auto again = (*log)->release_before(cut);
  ASSERT_TRUE(again.has_value()) << again.error().describe();
  EXPECT_TRUE(again->ids.empty());
  EXPECT_EQ(again->bytes_deleted + again->bytes_recycled, 0u);
  EXPECT_EQ(again->oldest, cut);
  ASSERT_TRUE((*log)->close().has_value());
}

TEST(Space, ReleaseReportsWhatLeftTheDiskWhenRecycling) {
  release_reports_what_left_the_disk(true);
}
TEST(Space, ReleaseReportsWhatLeftTheDiskWhenDeleting) {
  release_reports_what_left_the_disk(false);
}

TEST(Space, AcrossCloseAndReopen) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  std::vector<Position> all;
  Bounds want;
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    want = append_n(**log, 300, 0, &all);
    ASSERT_TRUE((*log)->close().has_value());
  }
  // Closed: no spares are left, only the log.
  const auto closed = files_on_disk(cfg.dir);
  EXPECT_EQ(closed.size(), want.size());

  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  auto segs = settled(**log);
  expect_bounds(segs, want);
  EXPECT_EQ((*log)->disk_bytes(), sum_bytes(files_on_disk(cfg.dir)));
  auto oldest = (*log)->oldest();
  ASSERT_TRUE(oldest.has_value());
  EXPECT_EQ(*oldest, all.front());
  // Before this session appends, the durable position is the previous
  // session's end, in its last segment: that one is kept, the older go.
  for (const auto& s : segs) {
    if (s.state == SegmentState::spare) continue;
    const auto expected =
        s.id == want.rbegin()->first ? SegmentState::sealed : SegmentState::releasable;
    EXPECT_EQ(s.state, expected) << "segment " << s.id << " is " << to_string(s.state);
  }

  auto pos = (*log)->append(make_record(1, 1000, 2000));
  ASSERT_TRUE(pos.has_value()) << pos.error().describe();
  EXPECT_GT(pos->segment(), want.rbegin()->first) << "a session starts a new segment";
  note(want, *pos);
  segs = settled(**log);
  expect_bounds(segs, want);
  for (const auto& s : segs) {
    if (s.id == pos->segment()) {
      EXPECT_EQ(s.state, SegmentState::active);
    } else if (s.id < pos->segment()) {
      EXPECT_EQ(s.state, SegmentState::releasable) << s.id;
    }
  }

  auto report = (*log)->release_before(*pos);
  ASSERT_TRUE(report.has_value()) << report.error().describe();
  EXPECT_EQ(report->ids.size(), want.size() - 1);
  EXPECT_EQ(report->oldest, *pos);
  ASSERT_TRUE((*log)->close().has_value());

  log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  oldest = (*log)->oldest();
  ASSERT_TRUE(oldest.has_value());
  EXPECT_EQ(*oldest, *pos);
  segs = settled(**log);
  EXPECT_EQ(files_listed(segs), files_on_disk(cfg.dir));
  ASSERT_FALSE(segs.empty());
  EXPECT_EQ(segs.front().first, *pos);
  EXPECT_EQ(segs.front().last, *pos);
}

}  // namespace
}  // namespace synclog::test
