// Pipelined syncs (syncs_in_flight > 1, uring and aio): several syncs in
// flight at once, durable() advancing only over the contiguous prefix of
// finished ones. The crash-state proof is CrashSim.Pipelined* and the chain
// simulator; this file pins the ordering itself with a hook that holds one
// sync's write completion while a later sync finishes first.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "io/hook.h"
#include "synclog/log.h"
#include "test_util.h"

namespace synclog::test {
namespace {

using namespace std::chrono_literals;

Config pipelined(const std::filesystem::path& dir, BackendKind backend) {
  Config cfg = small_config(dir);
  cfg.backend = backend;
  cfg.segment_kind = SegmentKind::direct;
  cfg.mode = SyncMode::batch;
  cfg.syncs_in_flight = 4;
  return cfg;
}

// Holds the completion of the first direct write after arm() (on the thread
// that reaps it, so only that sync waits) until release(); counts the direct
// writes that complete meanwhile.
class Gate : public io::Hook {
 public:
  void after(const io::Event& e) override {
    if (e.op != io::Op::direct_write) return;
    std::unique_lock lock(mu_);
    if (holding_) {
      ++completed_while_held_;
      cv_.notify_all();
      return;
    }
    if (!armed_) return;
    armed_ = false;
    holding_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_; });
    holding_ = false;
  }
  void arm() {
    std::lock_guard lock(mu_);
    armed_ = true;
  }
  bool wait_holding() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return holding_; });
  }
  bool wait_completed_while_held(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return completed_while_held_ >= n; });
  }
  void release() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;
  bool holding_ = false;
  bool released_ = false;
  int completed_while_held_ = 0;
};

class Pipeline : public ::testing::TestWithParam<BackendKind> {};

// A later sync that finishes first must not make the earlier one's records,
// or its own, look durable: no completion, no wait_durable, no durable().
TEST_P(Pipeline, ALaterSyncFinishingFirstPublishesNothing) {
  TempDir dir;
  Gate gate;
  HookGuard guard(&gate);
  auto log = Log::open(pipelined(dir.path(), GetParam()));
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  ASSERT_NE((*log)->backend().find("4 syncs in flight"), std::string::npos) << (*log)->backend();
  // The first append takes the session's first segment: done before arming.
  ASSERT_TRUE((*log)->append("warm-up").has_value());
  const Position before = (*log)->durable();

  std::mutex mu;
  std::vector<int> order;
  auto done = [&](int n) {
    return [&, n](Result<Position> r) {
      EXPECT_TRUE(r.has_value()) << r.error().describe();
      std::lock_guard lock(mu);
      order.push_back(n);
    };
  };
  gate.arm();
  auto first = (*log)->append_async(std::string(3000, 'a'), done(1));
  ASSERT_TRUE(first.has_value()) << first.error().describe();
  ASSERT_TRUE(gate.wait_holding()) << "the first sync's write never completed";
  auto second = (*log)->append_async(std::string(3000, 'b'), done(2));
  ASSERT_TRUE(second.has_value()) << second.error().describe();
  ASSERT_TRUE(gate.wait_completed_while_held(1)) << "no second sync ran while the first was held";

  // The second sync is done on the device; the first is not acknowledged.
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ((*log)->durable(), before);
  auto waited = (*log)->wait_durable(*second, 20ms);
  ASSERT_FALSE(waited.has_value());
  EXPECT_EQ(waited.error().code, Errc::timeout) << waited.error().describe();
  {
    std::lock_guard lock(mu);
    EXPECT_TRUE(order.empty()) << "a completion fired for a record behind a sync in flight";
  }

  gate.release();
  auto ok = (*log)->wait_durable(*second, 10s);
  EXPECT_TRUE(ok.has_value()) << ok.error().describe();
  EXPECT_GT((*log)->durable(), *second);
  ASSERT_TRUE((*log)->close().has_value());
  EXPECT_EQ(order, (std::vector<int>{1, 2}));

  auto replayed = replay_all(pipelined(dir.path(), GetParam()));
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  ASSERT_EQ(replayed->size(), 3u);
  EXPECT_EQ((*replayed)[1].data, std::string(3000, 'a'));
  EXPECT_EQ((*replayed)[2].data, std::string(3000, 'b'));
}

// Holds the first direct write after arm() before it starts, then fails it
// with EIO once released.
class HoldThenFail : public io::Hook {
 public:
  int before(const io::Event& e) override {
    if (e.op != io::Op::direct_write) return 0;
    std::unique_lock lock(mu_);
    if (!armed_) return 0;
    armed_ = false;
    holding_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_; });
    return EIO;
  }
  void arm() {
    std::lock_guard lock(mu_);
    armed_ = true;
  }
  bool wait_holding() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return holding_; });
  }
  void release() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false, holding_ = false, released_ = false;
};

// A sync without a marker (its segment had no room for one) makes the next
// sync wait for it before writing. If the first one fails, the waiting one
// must learn of it: its appends fail, and close() returns. Before the fix
// the waiting lane slept for ever and close() hung joining it.
TEST_P(Pipeline, ASyncWaitingForAFailedSyncBeforeItsOwnFailsToo) {
  TempDir dir;
  HoldThenFail gate;
  HookGuard guard(&gate);
  Config cfg = pipelined(dir.path(), GetParam());
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  // Fill the first segment past its middle, so that one record can end
  // exactly at its capacity (no room left for the marker of its sync).
  const uint64_t capacity = cfg.segment_size - 8;
  while ((*log)->durable().offset() < capacity / 2 + 4096) {
    ASSERT_TRUE((*log)->append(std::string(8000, 'f')).has_value());
  }
  const Position head = (*log)->durable();
  ASSERT_EQ(head.segment(), 1u);
  const uint64_t fill = capacity - head.offset() - 8;  // payload of a record ending at capacity
  ASSERT_LE(fill, cfg.max_unfragmented_size());
  std::atomic<int> failed{0};
  auto expect_failure = [&](Result<Position> r) {
    EXPECT_FALSE(r.has_value());
    failed.fetch_add(1);
  };
  gate.arm();
  auto last = (*log)->append_async(std::string(fill, 'l'), expect_failure);
  ASSERT_TRUE(last.has_value()) << last.error().describe();
  EXPECT_EQ(last->offset(), head.offset());
  ASSERT_TRUE(gate.wait_holding()) << "the marker-less sync never wrote";
  // The next record opens segment 2; its sync waits for the held one.
  auto next = (*log)->append_async("next", expect_failure);
  ASSERT_TRUE(next.has_value()) << next.error().describe();
  EXPECT_EQ(next->segment(), 2u);
  std::this_thread::sleep_for(100ms);  // let that sync start waiting
  gate.release();
  if (!eventually([&] { return failed.load() == 2; })) {
    (void)log->release();  // its close() would hang: leave it
    FAIL() << "the sync behind the failed one never ended (" << failed.load()
           << " of 2 completions)";
  }
  // close() in a thread of its own: before the fix it never returned.
  auto closed = std::make_shared<std::atomic<int>>(0);  // 1 = error, 2 = ok
  Log* raw = log->get();
  std::thread closer([raw, closed] { closed->store(raw->close().has_value() ? 2 : 1); });
  if (!eventually([&] { return closed->load() != 0; })) {
    closer.detach();
    (void)log->release();
    FAIL() << "close() never returned: a sync still waits for the failed one";
  }
  closer.join();
  EXPECT_EQ(closed->load(), 1) << "close() after a failed sync must report it";
}

// Many writers, blocking and asynchronous, over many segments: every record
// replays in position order and the syncs really overlapped.
TEST_P(Pipeline, WritersAcrossSegmentsReplayInOrder) {
  TempDir dir;
  Config cfg = pipelined(dir.path(), GetParam());
  cfg.segment_size = 64 << 10;
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  constexpr int kThreads = 4;
  const int per_thread = scaled(400);
  std::atomic<int> completions{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const std::string rec = make_record(static_cast<uint32_t>(t), static_cast<uint64_t>(i),
                                            64 + static_cast<size_t>(i * 37 % 900));
        if (t % 2 == 0) {
          auto p = (*log)->append(rec);
          ASSERT_TRUE(p.has_value()) << p.error().describe();
        } else {
          auto p = (*log)->append_async(rec, [&](Result<Position> r) {
            EXPECT_TRUE(r.has_value()) << r.error().describe();
            completions.fetch_add(1);
          });
          ASSERT_TRUE(p.has_value()) << p.error().describe();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE((*log)->close().has_value());
  EXPECT_EQ(completions.load(), per_thread * kThreads / 2);
  auto replayed = replay_all(cfg);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  ASSERT_EQ(replayed->size(), static_cast<size_t>(per_thread * kThreads));
  std::vector<uint64_t> next(kThreads, 0);
  for (size_t i = 0; i < replayed->size(); ++i) {
    uint32_t t = 0;
    uint64_t seq = 0;
    ASSERT_TRUE(check_record((*replayed)[i].data, &t, &seq)) << "record " << i;
    ASSERT_LT(t, static_cast<uint32_t>(kThreads));
    EXPECT_EQ(seq, next[t]++) << "thread " << t << "'s records out of order";
    if (i > 0) {
      EXPECT_LT((*replayed)[i - 1].position, (*replayed)[i].position);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DirectBackends, Pipeline,
                         ::testing::Values(BackendKind::uring, BackendKind::aio),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// Where syncs in flight could overlap or be paced by time, the key is refused
// by name.
TEST(PipelineConfig, RefusedWhereSyncsCouldOverlap) {
  auto expect_refused = [](const std::string& text, const std::string& needle) {
    auto cfg = Config::parse("dir=/tmp," + text);
    ASSERT_TRUE(cfg.has_value()) << cfg.error().describe();
    auto v = cfg->validate();
    ASSERT_FALSE(v.has_value()) << text;
    EXPECT_EQ(v.error().code, Errc::invalid_config);
    EXPECT_NE(v.error().message.find("syncs_in_flight"), std::string::npos) << v.error().message;
    EXPECT_NE(v.error().message.find(needle), std::string::npos) << v.error().message;
  };
  expect_refused("backend=msync,syncs_in_flight=2", "backend=uring");
  expect_refused("backend=pwrite,syncs_in_flight=2", "backend=uring");
  expect_refused("backend=uring,tail=rewrite,syncs_in_flight=2", "tail=pad");
  expect_refused("backend=aio,mode=group,syncs_in_flight=2", "mode=batch");
  expect_refused("backend=aio,mode=periodic,syncs_in_flight=4", "mode=batch");
  expect_refused("backend=uring,syncs_in_flight=0", "1..64");
  expect_refused("backend=uring,syncs_in_flight=65", "1..64");
  auto ok = Config::parse("dir=/tmp,backend=uring,syncs_in_flight=8");
  ASSERT_TRUE(ok.has_value());
  EXPECT_TRUE(ok->validate().has_value());
  EXPECT_NE(ok->to_string().find("syncs_in_flight=8"), std::string::npos);
}

}  // namespace
}  // namespace synclog::test
