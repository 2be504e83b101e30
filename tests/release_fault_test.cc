// Releasing segments never makes a hole, whatever fails (issue path 6): a
// transient error on the unlink or the rename of the oldest segment leaves
// it in the log, and a later release_before starts again from it instead of
// removing the segments after it; a failed directory fsync stops releasing
// for the session. Every check ends with a fresh open that must replay
// every record not released.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "io/hook.h"
#include "segments/segment.h"
#include "test_util.h"

namespace synclog::test {
namespace {

// Fails the first `times` operations `op` that the constructing thread makes
// on files whose name starts with `name_prefix` with `err` (the manager's
// own thread, creating spares, is left alone).
class FailOp : public io::Hook {
 public:
  FailOp(io::Op op, std::string name_prefix, int err, int times)
      : op_(op), prefix_(std::move(name_prefix)), err_(err), left_(times) {}
  int before(const io::Event& e) override {
    if (std::this_thread::get_id() != thread_) return 0;
    if (e.op != op_ || !e.path.filename().string().starts_with(prefix_)) return 0;
    if (left_.fetch_sub(1) <= 0) return 0;
    ++fired_;
    return err_;
  }
  int fired() const { return fired_.load(); }

 private:
  const io::Op op_;
  const std::string prefix_;
  const int err_;
  std::atomic<int> left_;
  std::atomic<int> fired_{0};
  const std::thread::id thread_ = std::this_thread::get_id();
};

Config release_config(const std::filesystem::path& dir, bool recycle) {
  Config cfg = small_config(dir);
  cfg.segment_size = 64 << 10;
  cfg.recycle = recycle;
  cfg.spare_segments = 2;
  return cfg;
}

// Appends until the log spans at least `segments` segments.
std::vector<Replayed> fill(Log& log, uint64_t segments, uint32_t thread) {
  std::vector<Replayed> out;
  for (uint64_t i = 0;; ++i) {
    const std::string rec = make_record(thread, i, 700);
    auto pos = log.append(rec);
    EXPECT_TRUE(pos.has_value()) << pos.error().describe();
    if (!pos) return out;
    out.push_back(Replayed{*pos, rec});
    if (pos->segment() >= segments) break;
  }
  EXPECT_TRUE(log.sync().has_value());
  return out;
}

// Reopens and checks that exactly the records from the first one at or
// past `floor` on replay, in order.
void expect_replay_from(const Config& cfg, const std::vector<Replayed>& written, Position floor) {
  RecoveryReport rep;
  auto got = replay_all(cfg, &rep);
  ASSERT_TRUE(got.has_value()) << got.error().describe();
  EXPECT_TRUE(rep.damage.empty()) << rep.damage.front().reason;
  std::vector<Replayed> want;
  for (const auto& r : written) {
    if (r.position.segment() >= floor.segment()) want.push_back(r);
  }
  ASSERT_GE(got->size(), want.size()) << "records after the release floor were lost";
  // Records of segments that failed to go may come first; then exactly `want`.
  const size_t skip = got->size() - want.size();
  for (size_t i = 0; i < skip; ++i) EXPECT_LT((*got)[i].position.segment(), floor.segment());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ((*got)[skip + i].position, want[i].position) << "record " << i;
    ASSERT_EQ((*got)[skip + i].data, want[i].data) << "record " << i;
  }
}

void transient_error_then_release_again(bool recycle) {
  TempDir dir;
  const Config cfg = release_config(dir.path(), recycle);
  std::vector<Replayed> written;
  Position floor;
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    written = fill(**log, 6, 1);
    // One EIO on the oldest segment's unlink (or rename to .recycle.tmp).
    FailOp hook(recycle ? io::Op::rename : io::Op::remove, seg::segment_file_name(1), EIO, 1);
    {
      HookGuard guard(&hook);
      auto r = (*log)->release_before(Position(4, 0));
      EXPECT_FALSE(r.has_value()) << "release_before hid the injected EIO";
    }
    ASSERT_EQ(hook.fired(), 1);
    EXPECT_TRUE(std::filesystem::exists(dir.path() / seg::segment_file_name(2)))
        << "a later segment went while an older one failed to";
    // The fault has passed: the next release starts again from segment 1.
    floor = Position(5, 0);
    auto again = (*log)->release_before(floor);
    EXPECT_TRUE(again.has_value()) << again.error().describe();
    EXPECT_FALSE(std::filesystem::exists(dir.path() / seg::segment_file_name(1)));
    auto more = fill(**log, 8, 2);
    written.insert(written.end(), more.begin(), more.end());
    ASSERT_TRUE((*log)->close().has_value());
  }
  expect_replay_from(cfg, written, floor);
}

TEST(ReleaseFault, Path6_TransientUnlinkErrorLeavesNoHole) {
  transient_error_then_release_again(false);
}

TEST(ReleaseFault, Path6_TransientRecycleRenameErrorLeavesNoHole) {
  transient_error_then_release_again(true);
}

// The error keeps coming: every release fails at the oldest segment, and
// nothing after it goes.
TEST(ReleaseFault, Path6_PersistentUnlinkErrorReleasesNothingAfterIt) {
  TempDir dir;
  const Config cfg = release_config(dir.path(), false);
  std::vector<Replayed> written;
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    written = fill(**log, 6, 1);
    FailOp hook(io::Op::remove, seg::segment_file_name(1), EIO, 1000);
    HookGuard guard(&hook);
    for (uint64_t s = 2; s <= 6; ++s) EXPECT_FALSE((*log)->release_before(Position(s, 0)));
    ASSERT_TRUE((*log)->close().has_value());
  }
  for (uint64_t id = 1; id <= 5; ++id)
    EXPECT_TRUE(std::filesystem::exists(dir.path() / seg::segment_file_name(id))) << id;
  expect_replay_from(cfg, written, Position(1, 0));
}

// A failed directory fsync after an unlink: the directory's state is
// unknown, so no later release may remove more (it could be the hole).
TEST(ReleaseFault, Path6_FailedDirectorySyncStopsReleasing) {
  TempDir dir;
  const Config cfg = release_config(dir.path(), false);
  std::vector<Replayed> written;
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    written = fill(**log, 6, 1);
    FailOp hook(io::Op::dir_sync, dir.path().filename().string(), EIO, 1);
    {
      HookGuard guard(&hook);
      auto r = (*log)->release_before(Position(3, 0));
      ASSERT_FALSE(r.has_value());
      EXPECT_EQ(r.error().code, Errc::io_error);
    }
    ASSERT_EQ(hook.fired(), 1);
    auto later = (*log)->release_before(Position(6, 0));
    ASSERT_FALSE(later.has_value()) << "released again after a failed directory fsync";
    EXPECT_NE(later.error().message.find("directory fsync"), std::string::npos)
        << later.error().message;
    EXPECT_TRUE(std::filesystem::exists(dir.path() / seg::segment_file_name(2)));
    ASSERT_TRUE((*log)->close().has_value());
  }
  expect_replay_from(cfg, written, Position(2, 0));
}

}  // namespace
}  // namespace synclog::test
