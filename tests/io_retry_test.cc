// Transient and degenerate results from the kernel's write paths: EAGAIN and
// EBUSY from io_uring_enter are retried (bounded), a write that completes
// with 0 bytes is retried a few times and then fails with a clear error,
// and a backend never returns while the kernel still reads its buffers.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>

#include "io/hook.h"
#include "test_util.h"

namespace synclog::test {
namespace {

bool is_segment(const io::Event& e) { return e.path.extension() == ".seg"; }

// A config for `backend` in `dir`, or nothing if this machine cannot run it.
std::optional<Config> config_for(const std::string& backend, const std::filesystem::path& dir) {
  auto parsed = Config::parse("backend=" + backend);
  EXPECT_TRUE(parsed.has_value());
  Config c = parsed.value_or(Config{});
  c.segment_kind = backend == "pwrite" ? SegmentKind::buffered : SegmentKind::direct;
  c.dir = dir;
  c.segment_size = 256 << 10;
  c.mode = SyncMode::batch;
  auto probe = Log::open(c);
  if (!probe && probe.error().code == Errc::unsupported) return std::nullopt;
  EXPECT_TRUE(probe.has_value()) << probe.error().describe();
  if (probe) {
    EXPECT_TRUE((*probe)->close().has_value());
  }
  return c;
}

// Fails io_uring_enter with `err` on the calls `fail(k)` picks (k counts
// from 1), the rest run.
class FailSubmits : public io::Hook {
 public:
  explicit FailSubmits(std::function<int(int)> fail) : fail_(std::move(fail)) {}
  int before_submit() override {
    const int err = fail_(++calls_);
    if (err != 0) ++injected_;
    return err;
  }
  int injected() const { return injected_.load(); }

 private:
  std::function<int(int)> fail_;
  std::atomic<int> calls_{0};
  std::atomic<int> injected_{0};
};

TEST(UringRetry, TransientSubmitErrorsAreRetried) {
  TempDir dir;
  auto cfg = config_for("uring", dir.path());
  if (!cfg) GTEST_SKIP() << "io_uring is not available here";
  auto log = Log::open(*cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  constexpr int kRecords = 300;
  FailSubmits hook([](int k) { return k % 3 == 0 ? EAGAIN : (k % 5 == 0 ? EBUSY : 0); });
  {
    HookGuard guard(&hook);
    for (int i = 0; i < kRecords; ++i) {
      auto pos = (*log)->append(make_record(0, i, 100));
      ASSERT_TRUE(pos.has_value()) << "record " << i << ": " << pos.error().describe();
    }
    ASSERT_TRUE((*log)->close().has_value());
  }
  EXPECT_GT(hook.injected(), 50);
  auto replayed = replay_all(*cfg);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  ASSERT_EQ(replayed->size(), size_t{kRecords});
}

TEST(UringRetry, EagainThatNeverEndsFailsWithItsCause) {
  TempDir dir;
  auto cfg = config_for("uring", dir.path());
  if (!cfg) GTEST_SKIP() << "io_uring is not available here";
  auto log = Log::open(*cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  ASSERT_TRUE((*log)->append("before").has_value());
  FailSubmits hook([](int) { return EAGAIN; });
  HookGuard guard(&hook);
  auto pos = (*log)->append("never durable");
  ASSERT_FALSE(pos.has_value());
  EXPECT_EQ(pos.error().code, Errc::failed);
  EXPECT_NE(pos.error().message.find(std::strerror(EAGAIN)), std::string::npos)
      << pos.error().message;
  EXPECT_NE(pos.error().message.find("giving up"), std::string::npos) << pos.error().message;
  EXPECT_EQ(pos.error().sys_errno, EAGAIN);
  // Closed while the hook is still there: the manager's thread may use it.
  (void)(*log)->close();
}

// Counts direct writes handed to the kernel and those reaped, and fails the
// `fail_at`-th io_uring_enter (after `armed`) with EINVAL: a ring that is
// broken, not busy. At that moment the writes queued before the previous
// enter are the ones the kernel has.
class FailSubmitCountWrites : public io::Hook {
 public:
  int before(const io::Event& e) override {
    if (armed && is_segment(e) && e.op == io::Op::direct_write) ++queued_;
    return 0;
  }
  void after(const io::Event& e) override {
    if (armed && is_segment(e) && e.op == io::Op::direct_write) ++reaped_;
  }
  int before_submit() override {
    if (!armed) return 0;
    if (++calls_ == 2) {
      submitted_ = taken_by_kernel_.load();
      return EINVAL;
    }
    taken_by_kernel_ = queued_.load();
    return 0;
  }
  std::atomic<bool> armed{false};
  int submitted() const { return submitted_.load(); }
  int reaped() const { return reaped_.load(); }

 private:
  std::atomic<int> queued_{0};
  std::atomic<int> reaped_{0};
  std::atomic<int> calls_{0};
  std::atomic<int> taken_by_kernel_{0};
  std::atomic<int> submitted_{-1};
};

TEST(UringInFlight, BrokenRingIsLeftOnlyWhenNoWriteIsInFlight) {
  TempDir dir(disk_base());
  auto cfg = config_for("uring", dir.path());
  if (!cfg) GTEST_SKIP() << "io_uring is not available here";
  // One sync of many 1 MiB writes, 8 at a time: the first enter leaves
  // most of its writes in flight when it returns with one completion.
  cfg->segment_size = 32 << 20;
  cfg->queue_depth = 8;
  cfg->mode = SyncMode::periodic;
  cfg->interval = std::chrono::seconds(100);
  cfg->lag_bound = std::chrono::seconds(100);
  auto log = Log::open(*cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  const std::string rec = make_record(0, 0, 256 << 10);
  for (int i = 0; i < 64; ++i) ASSERT_TRUE((*log)->append(rec).has_value());
  FailSubmitCountWrites hook;
  HookGuard guard(&hook);
  hook.armed = true;
  auto r = (*log)->sync();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::failed);
  EXPECT_NE(r.error().message.find(std::strerror(EINVAL)), std::string::npos) << r.error().message;
  ASSERT_GT(hook.submitted(), 1);
  // Every write the kernel took was reaped before the sync returned.
  EXPECT_EQ(hook.reaped(), hook.submitted());
  (void)(*log)->close();
}

// Reports the first `zeros` writes to segments (after `armed`) as having
// written 0 bytes; a negative count means every write.
class ZeroWrites : public io::Hook {
 public:
  explicit ZeroWrites(int zeros) : zeros_(zeros) {}
  int64_t written(const io::Event& e, int64_t bytes) override {
    if (!armed || !is_segment(e)) return bytes;
    if (zeros_ >= 0 && given_.load() >= zeros_) return bytes;
    ++given_;
    return 0;
  }
  std::atomic<bool> armed{false};
  int given() const { return given_.load(); }

 private:
  const int zeros_;
  std::atomic<int> given_{0};
};

class ZeroByteWrites : public ::testing::TestWithParam<std::string> {};

TEST_P(ZeroByteWrites, AFewAreRetried) {
  TempDir dir;
  auto cfg = config_for(GetParam(), dir.path());
  if (!cfg) GTEST_SKIP() << GetParam() << " is not available here";
  auto log = Log::open(*cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  ZeroWrites hook(2);
  HookGuard guard(&hook);
  hook.armed = true;
  for (int i = 0; i < 20; ++i) {
    auto pos = (*log)->append(make_record(0, i, 100));
    ASSERT_TRUE(pos.has_value()) << pos.error().describe();
  }
  EXPECT_EQ(hook.given(), 2);
  ASSERT_TRUE((*log)->close().has_value());
  io::install_hook(nullptr);
  auto replayed = replay_all(*cfg);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  EXPECT_EQ(replayed->size(), size_t{20});
}

TEST_P(ZeroByteWrites, EndlessOnesFailWithAClearError) {
  TempDir dir;
  auto cfg = config_for(GetParam(), dir.path());
  if (!cfg) GTEST_SKIP() << GetParam() << " is not available here";
  auto log = Log::open(*cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  ZeroWrites hook(-1);
  HookGuard guard(&hook);
  hook.armed = true;
  auto pos = (*log)->append("never written");
  ASSERT_FALSE(pos.has_value());
  EXPECT_EQ(pos.error().code, Errc::failed);
  EXPECT_NE(pos.error().message.find("0 bytes"), std::string::npos) << pos.error().message;
  EXPECT_NE(pos.error().message.find("times in a row"), std::string::npos) << pos.error().message;
  EXPECT_GE(hook.given(), 4);
  EXPECT_LE(hook.given(), 20);
  (void)(*log)->close();
}

INSTANTIATE_TEST_SUITE_P(Backends, ZeroByteWrites, ::testing::Values("uring", "aio", "pwrite"));

}  // namespace
}  // namespace synclog::test
