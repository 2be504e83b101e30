// G4: after an I/O error in a sync the log fails stop. Every waiting and
// later append gets the error with its cause, nothing more is acknowledged,
// and the failed sync is never retried into a false success.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "fail_nth_sync.h"
#include "io/hook.h"
#include "test_util.h"

namespace synclog::test {
namespace {

TEST(Fault, FailedSyncStopsTheLogForEveryWriter) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.mode = SyncMode::batch;
  FailNthSync hook(40);
  std::unique_ptr<Log> log;
  {
    auto opened = Log::open(cfg);
    ASSERT_TRUE(opened.has_value()) << opened.error().describe();
    log = std::move(*opened);
  }
  HookGuard guard(&hook);
  constexpr int kThreads = 4;
  std::mutex mu;
  std::vector<Position> acked;
  std::vector<Error> errors;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i) {
        auto pos = log->append(make_record(t, i, 100));
        std::lock_guard lock(mu);
        if (!pos) {
          errors.push_back(pos.error());
          return;
        }
        acked.push_back(*pos);
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(hook.fired());
  // Every writer stopped with the error, and the cause is in the message.
  ASSERT_EQ(errors.size(), size_t{kThreads});
  for (const auto& e : errors) {
    EXPECT_EQ(e.code, Errc::failed) << e.describe();
    EXPECT_NE(e.message.find("Input/output error"), std::string::npos) << e.message;
    EXPECT_EQ(e.sys_errno, EIO);
  }
  // Nothing past the failure was acknowledged, and nothing was acknowledged
  // that is not durable.
  const Position durable = log->durable();
  for (const auto& p : acked) EXPECT_LT(p, durable);
  auto later = log->append("after the failure");
  ASSERT_FALSE(later.has_value());
  EXPECT_EQ(later.error().code, Errc::failed);
  auto sync = log->sync();
  ASSERT_FALSE(sync.has_value());
  EXPECT_EQ(sync.error().code, Errc::failed);
  EXPECT_FALSE(log->close().has_value());
  // The failed sync was not retried (fsyncgate: a retry could lie).
  EXPECT_EQ(hook.after_failure(), 0);
  log.reset();
  io::install_hook(nullptr);
  // Everything acknowledged is there after reopening.
  auto replayed = replay_all(cfg);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  std::vector<Position> found;
  for (const auto& r : *replayed) found.push_back(r.position);
  for (const auto& p : acked) {
    EXPECT_TRUE(std::binary_search(found.begin(), found.end(), p)) << p.to_string();
  }
}

TEST(Fault, PeriodicModeAppendsFailAfterTheSyncFails) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.mode = SyncMode::periodic;
  cfg.interval = std::chrono::milliseconds(1);
  FailNthSync hook(3);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value());
  HookGuard guard(&hook);
  Result<Position> r = Position{};
  for (int i = 0; i < 1'000'000 && r; ++i) {
    r = (*log)->append(make_record(0, i, 64));
    if (i % 100 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ASSERT_FALSE(r.has_value()) << "appends never saw the failure";
  EXPECT_EQ(r.error().code, Errc::failed);
  EXPECT_EQ(hook.after_failure(), 0);
}

}  // namespace
}  // namespace synclog::test
