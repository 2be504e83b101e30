// append_async(), wait_durable() and durable_fd(): every completion fires
// exactly once, in position order, only for a durable record; a failed sync
// fails every pending one; close() completes or fails every pending one.
#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include "fail_nth_sync.h"
#include "test_util.h"

namespace synclog::test {
namespace {

struct Outcomes {
  std::mutex mu;
  std::vector<Position> ok;  // in the order the callbacks ran
  std::vector<Error> failed;
  std::atomic<int> calls{0};
  Log* log = nullptr;
  std::atomic<int> not_durable{0};  // successes reported for a record not yet durable

  Log::Completion callback() {
    return [this](Result<Position> r) {
      ++calls;
      std::lock_guard lock(mu);
      if (r) {
        if (!(log->durable() > *r)) ++not_durable;
        ok.push_back(*r);
      } else {
        failed.push_back(r.error());
      }
    };
  }
};

void run_mode(SyncMode mode) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.mode = mode;
  cfg.interval = std::chrono::milliseconds(2);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  Outcomes out;
  out.log = log->get();
  constexpr int kThreads = 2;
  const int per = scaled(2000);
  std::vector<std::thread> threads;
  std::mutex mu;
  std::vector<Position> returned;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < per; ++i) {
        auto pos = (*log)->append_async(make_record(t, i, 100), out.callback());
        ASSERT_TRUE(pos.has_value()) << pos.error().describe();
        std::lock_guard lock(mu);
        returned.push_back(*pos);
      }
    });
  }
  for (auto& th : threads) th.join();
  // The last record of each thread becomes durable without anyone syncing.
  std::sort(returned.begin(), returned.end());
  auto waited = (*log)->wait_durable(returned.back(), std::chrono::seconds(30));
  ASSERT_TRUE(waited.has_value()) << waited.error().describe();
  ASSERT_TRUE((*log)->close().has_value());
  EXPECT_EQ(out.calls.load(), kThreads * per);
  EXPECT_TRUE(out.failed.empty());
  EXPECT_EQ(out.not_durable.load(), 0);
  EXPECT_TRUE(std::is_sorted(out.ok.begin(), out.ok.end())) << "callbacks out of position order";
  EXPECT_EQ(out.ok, returned);
  auto all = replay_all(cfg);
  ASSERT_TRUE(all.has_value()) << all.error().describe();
  ASSERT_EQ(all->size(), returned.size());
  for (size_t i = 0; i < all->size(); ++i) EXPECT_EQ((*all)[i].position, returned[i]);
}

TEST(Async, CompletionsFireOnceInOrderWhenDurableInBatchMode) { run_mode(SyncMode::batch); }
TEST(Async, CompletionsFireOnceInOrderWhenDurableInGroupMode) { run_mode(SyncMode::group); }
TEST(Async, CompletionsFireOnceInOrderWhenDurableInPeriodicMode) { run_mode(SyncMode::periodic); }

TEST(Async, WaitDurableTimesOutAndRefusesAPositionNeverAppended) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.mode = SyncMode::periodic;
  cfg.interval = std::chrono::milliseconds(60'000);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  auto pos = (*log)->append_async("waits for the periodic sync");
  ASSERT_TRUE(pos.has_value());
  auto w = (*log)->wait_durable(*pos, std::chrono::milliseconds(50));
  ASSERT_FALSE(w.has_value());
  EXPECT_EQ(w.error().code, Errc::timeout) << w.error().describe();
  auto far = (*log)->wait_durable(Position(pos->segment() + 5, 64), std::chrono::seconds(1));
  ASSERT_FALSE(far.has_value());
  EXPECT_EQ(far.error().code, Errc::invalid_argument) << far.error().describe();
  ASSERT_TRUE((*log)->sync().has_value());
  EXPECT_TRUE((*log)->wait_durable(*pos, std::chrono::seconds(0)).has_value());
  ASSERT_TRUE((*log)->close().has_value());
}

TEST(Async, DurableFdBecomesReadableWhenDurableAdvances) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.mode = SyncMode::batch;
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  auto fd = (*log)->durable_fd();
  ASSERT_TRUE(fd.has_value()) << fd.error().describe();
  pollfd p{*fd, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0) << "readable before anything happened";
  auto pos = (*log)->append_async("wakes the loop");
  ASSERT_TRUE(pos.has_value());
  // A single-threaded loop: poll, re-arm, look at durable().
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!((*log)->durable() > *pos) && std::chrono::steady_clock::now() < deadline) {
    ASSERT_GE(::poll(&p, 1, 1000), 0);
    uint64_t n = 0;
    if (p.revents & POLLIN) {
      ASSERT_EQ(::read(*fd, &n, sizeof n), ssize_t{sizeof n});
    }
  }
  EXPECT_GT((*log)->durable(), *pos);
  ASSERT_TRUE((*log)->close().has_value());
  EXPECT_EQ(::poll(&p, 1, 0), 1) << "close() must signal the loop";
}

TEST(Async, CloseCompletesEveryPendingCallback) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.mode = SyncMode::periodic;
  cfg.interval = std::chrono::milliseconds(60'000);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  Outcomes out;
  out.log = log->get();
  const int n = scaled(500);
  for (int i = 0; i < n; ++i)
    ASSERT_TRUE((*log)->append_async(make_record(0, i, 64), out.callback()).has_value());
  ASSERT_TRUE((*log)->close().has_value());
  EXPECT_EQ(out.calls.load(), n);
  EXPECT_EQ(out.ok.size(), size_t(n));
  EXPECT_EQ(out.not_durable.load(), 0);
}

TEST(Async, FailedSyncFailsEveryPendingCallbackOnce) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.mode = SyncMode::batch;
  FailNthSync hook(20);
  std::unique_ptr<Log> log;
  {
    auto opened = Log::open(cfg);
    ASSERT_TRUE(opened.has_value()) << opened.error().describe();
    log = std::move(*opened);
  }
  Outcomes out;
  out.log = log.get();
  int returned = 0;
  {
    HookGuard guard(&hook);
    for (int i = 0; i < 20'000 && !log->stats().failures; ++i) {
      if (log->append_async(make_record(0, i, 200), out.callback())) ++returned;
    }
    // Failed before close(): otherwise the check of syncs begun after the
    // failure below would look at none.
    ASSERT_GT(log->stats().failures, 0u) << "sync 20 did not fail within 20,000 appends";
    hook.observed();
    // Appends after the failure are refused, and start no sync.
    EXPECT_FALSE(log->append_async("after the failure", out.callback()).has_value());
    EXPECT_FALSE(log->close().has_value());
  }
  log.reset();
  ASSERT_TRUE(hook.fired());
  EXPECT_EQ(hook.after_observed(), 0) << "a sync began after the log failed";
  EXPECT_EQ(out.calls.load(), returned);
  EXPECT_FALSE(out.failed.empty());
  for (const Error& e : out.failed) EXPECT_EQ(e.code, Errc::failed) << e.describe();
  EXPECT_EQ(out.not_durable.load(), 0);
  auto all = replay_all(cfg);
  ASSERT_TRUE(all.has_value()) << all.error().describe();
  std::vector<Position> found;
  for (const auto& r : *all) found.push_back(r.position);
  for (const Position& p : out.ok)
    EXPECT_TRUE(std::binary_search(found.begin(), found.end(), p)) << p.to_string();
}

// Completions racing close() and a failing sync: two threads keep appends
// in flight, callbacks chain further appends, and the log closes (or a sync
// fails) with many callbacks pending. Each append_async() that returned a
// position is called back exactly once, one that did not never; a success
// only for a durable record, in position order, and it replays after
// reopening.
TEST(Async, StressCompletionsRaceCloseAndAFailingSync) {
  std::mt19937_64 rng(0x5eed);
  const int rounds = kThreadSanitized ? 6 : 24;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    TempDir dir;
    Config cfg = small_config(dir.path());
    const SyncMode modes[] = {SyncMode::batch, SyncMode::group, SyncMode::periodic};
    cfg.mode = modes[round % 3];
    cfg.interval = std::chrono::milliseconds(1 + rng() % 5);
    const bool fail = round % 2 == 1;
    FailNthSync hook(fail ? 2 + static_cast<int>(rng() % 30) : 1 << 30);
    std::unique_ptr<Log> log;
    {
      auto opened = Log::open(cfg);
      ASSERT_TRUE(opened.has_value()) << opened.error().describe();
      log = std::move(*opened);
    }
    constexpr int kMaxIds = 4000;
    std::vector<std::atomic<int>> calls(kMaxIds);  // by call id: callbacks run
    std::atomic<int> next_id{0};
    std::mutex mu;
    std::vector<int> returned;  // ids of the calls that returned a position
    std::vector<Position> ok;   // successes, in the order they ran
    std::atomic<int> not_durable{0}, bad_error{0};
    // One append_async() with a fresh id; false when it was refused.
    std::function<bool(int, int, int)> append = [&](int lane, int i, int depth) {
      const int id = next_id++;
      if (id >= kMaxIds) return false;
      auto pos = log->append_async(
          make_record(lane, i, 16 + (i * 37) % 300), [&, id, depth](Result<Position> r) {
            ++calls[id];
            if (r) {
              if (!(log->durable() > *r)) ++not_durable;
              std::lock_guard lock(mu);
              ok.push_back(*r);
            } else if (r.error().code != Errc::failed && r.error().code != Errc::closed) {
              ++bad_error;
            }
            // A callback may append (never wait): chains run into close().
            if (r && depth < 3) (void)append(9, id, depth + 1);
          });
      if (!pos) return false;
      std::lock_guard lock(mu);
      returned.push_back(id);
      return true;
    };
    {
      HookGuard guard(&hook);
      std::vector<std::thread> threads;
      for (int t = 0; t < 2; ++t) {
        threads.emplace_back([&, t, n = scaled(400) + static_cast<int>(rng() % 200)] {
          for (int i = 0; i < n && append(t, i, 0); ++i) {
          }
        });
      }
      for (auto& th : threads) th.join();
      auto closed = log->close();
      if (!fail) {
        EXPECT_TRUE(closed.has_value()) << closed.error().describe();
      }
    }
    log.reset();
    std::lock_guard lock(mu);
    std::vector<bool> was_returned(kMaxIds);
    for (int id : returned) was_returned[static_cast<size_t>(id)] = true;
    for (int id = 0; id < kMaxIds; ++id) {
      EXPECT_EQ(calls[static_cast<size_t>(id)].load(),
                was_returned[static_cast<size_t>(id)] ? 1 : 0)
          << "call " << id;
    }
    EXPECT_EQ(not_durable.load(), 0);
    EXPECT_EQ(bad_error.load(), 0);
    EXPECT_TRUE(std::is_sorted(ok.begin(), ok.end())) << "successes out of position order";
    auto all = replay_all(cfg);
    ASSERT_TRUE(all.has_value()) << all.error().describe();
    std::vector<Position> found;
    for (const auto& r : *all) found.push_back(r.position);
    for (const Position& p : ok)
      EXPECT_TRUE(std::binary_search(found.begin(), found.end(), p)) << p.to_string();
  }
}

// A callback that throws is caught: every other callback still runs once,
// the log goes on, and stats() (JSON and Prometheus too) counts it and
// names the first exception. Before, it ended the process.
TEST(Async, AThrowingCallbackIsCaughtCountedAndTheOthersRun) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.mode = SyncMode::batch;
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  std::atomic<int> calls{0};
  const int n = scaled(200);
  for (int i = 0; i < n; ++i) {
    auto pos = (*log)->append_async(make_record(0, static_cast<uint64_t>(i), 64),
                                    [&, i](Result<Position> r) {
                                      ++calls;
                                      if (!r) return;
                                      if (i % 50 == 7) throw std::runtime_error("engine bug");
                                      if (i == 8) throw 42;
                                    });
    ASSERT_TRUE(pos.has_value()) << pos.error().describe();
  }
  ASSERT_TRUE((*log)->sync().has_value());
  auto more = (*log)->append("after the throws");
  ASSERT_TRUE(more.has_value()) << more.error().describe();
  ASSERT_TRUE((*log)->wait_durable(*more, std::chrono::seconds(10)).has_value());
  // After close(): every callback has run by then.
  ASSERT_TRUE((*log)->close().has_value());
  const Stats s = (*log)->stats();
  EXPECT_EQ(calls.load(), n);
  EXPECT_EQ(s.callback_exceptions, static_cast<uint64_t>(n / 50 + (n % 50 > 7 ? 1 : 0) + 1));
  EXPECT_NE(s.callback_error.find("engine bug"), std::string::npos) << s.callback_error;
  EXPECT_NE(to_json(s).find("\"callback_exceptions\":"), std::string::npos);
  auto prom = to_prometheus(s);
  ASSERT_TRUE(prom.has_value()) << prom.error().describe();
  EXPECT_NE(prom->find("synclog_callback_exceptions_total "), std::string::npos);
}

// close() from a completion callback is an error value, and the log stays
// open: it used to abort the process (the callback thread joined itself).
TEST(Async, CloseFromACallbackIsAnErrorAndTheLogStaysOpen) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.mode = SyncMode::group;
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  std::promise<Result<void>> got;
  auto pos = (*log)->append_async("first", [&](Result<Position> r) {
    if (r) got.set_value((*log)->close());
  });
  ASSERT_TRUE(pos.has_value()) << pos.error().describe();
  auto future = got.get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const Result<void> closed = future.get();
  ASSERT_FALSE(closed.has_value());
  EXPECT_EQ(closed.error().code, Errc::invalid_argument) << closed.error().describe();
  EXPECT_NE(closed.error().message.find("completion callback"), std::string::npos)
      << closed.error().describe();
  auto later = (*log)->append("still open");
  ASSERT_TRUE(later.has_value()) << later.error().describe();
  ASSERT_TRUE((*log)->close().has_value());
  auto replayed = replay_all(cfg);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  ASSERT_EQ(replayed->size(), 2u);
  EXPECT_EQ((*replayed)[1].data, "still open");
}

// Destroying the Log from its own callback cannot join the callback
// thread: the process stops with a message naming the mistake (it used to
// die of an uncaught std::system_error, "Resource deadlock avoided").
TEST(AsyncDeathTest, DestroyingTheLogFromACallbackSaysWhy) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TempDir dir;
  const Config cfg = small_config(dir.path());
  EXPECT_DEATH(
      {
        auto log = Log::open(cfg);
        if (!log) std::abort();
        std::promise<void> never;
        auto pos = (*log)->append_async("x", [&](Result<Position>) { log->reset(); });
        if (!pos) std::abort();
        never.get_future().wait_for(std::chrono::seconds(10));
      },
      "destroyed from its own completion callback");
}

}  // namespace
}  // namespace synclog::test
