#include <gtest/gtest.h>

#include <thread>

#include "test_util.h"

namespace synclog::test {
namespace {

constexpr int kThreads = 8;
constexpr int kPerThread = scaled(50'000);

class Concurrency : public ::testing::TestWithParam<SyncMode> {};

TEST_P(Concurrency, EveryRecordExactlyOnceInOrder) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.mode = GetParam();
  cfg.segment_size = 1 << 20;  // many roll-overs
  cfg.interval = std::chrono::milliseconds(2);
  // The window's own effect is checked in GroupModeSyncsAtMostOncePerWindow;
  // here a short one keeps 400k closed-loop appends quick.
  cfg.window = std::chrono::microseconds(1);
  std::vector<std::vector<Position>> acked(kThreads);
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        acked[t].reserve(kPerThread);
        for (int i = 0; i < kPerThread; ++i) {
          auto pos = (*log)->append(make_record(t, i, 16 + (i % 97)));
          if (!pos) {
            ADD_FAILURE() << pos.error().describe();
            return;
          }
          // batch and group: append returns once durable.
          if (cfg.mode != SyncMode::periodic && !((*log)->durable() > *pos)) {
            ADD_FAILURE() << "acknowledged before durable: " << pos->to_string();
            return;
          }
          acked[t].push_back(*pos);
        }
      });
    }
    for (auto& th : threads) th.join();
    ASSERT_TRUE((*log)->close().has_value());
  }
  auto replayed = replay_all(cfg);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  ASSERT_EQ(replayed->size(), size_t{kThreads} * kPerThread);
  std::vector<uint64_t> next(kThreads, 0);
  Position last;
  for (const auto& r : *replayed) {
    uint32_t t;
    uint64_t seq;
    ASSERT_TRUE(check_record(r.data, &t, &seq)) << "corrupt record at " << r.position.to_string();
    ASSERT_LT(t, uint32_t{kThreads});
    ASSERT_EQ(seq, next[t]) << "thread " << t << " out of order or duplicated";
    ASSERT_EQ(r.position, acked[t][seq]);
    ++next[t];
    ASSERT_LT(last, r.position);
    last = r.position;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, Concurrency,
                         ::testing::Values(SyncMode::batch, SyncMode::group, SyncMode::periodic),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(Concurrency, GroupModeSyncsAtMostOncePerWindow) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.mode = SyncMode::group;
  cfg.window = std::chrono::milliseconds(20);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value());
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) ASSERT_TRUE((*log)->append(make_record(t, i, 100)).has_value());
    });
  }
  for (auto& th : threads) th.join();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  const uint64_t syncs = (*log)->stats().syncs;
  // Syncs start at least a window apart, so there can be no more than
  // elapsed / window + 1 of them (+1 for the session record's first sync).
  EXPECT_LE(syncs, static_cast<uint64_t>(elapsed / cfg.window) + 2) << "syncs=" << syncs;
  // And appends were grouped: 80 appends took far fewer syncs.
  EXPECT_LT(syncs, 80u);
}

TEST(Concurrency, ReaderSeesOnlyDurableRecordsWhileWritersRun) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.mode = SyncMode::periodic;
  cfg.interval = std::chrono::milliseconds(1);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value());
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    // Bounded, so the 50 full replays below stay cheap even where the
    // writer is fast and the build is slow (TSan).
    for (uint64_t i = 0; !stop.load() && i < 20000; ++i) {
      if (!(*log)->append(make_record(0, i, 40)).has_value()) return;
    }
  });
  for (int round = 0; round < 50; ++round) {
    auto recs = read_all(**log);
    // durable() only grows: read after the reader was made, it bounds the
    // reader's end (reading it before raced with the writer).
    const Position after = (*log)->durable();
    for (size_t i = 0; i < recs.size(); ++i) {
      uint32_t t;
      uint64_t seq;
      ASSERT_TRUE(check_record(recs[i].data, &t, &seq));
      ASSERT_EQ(seq, i);
    }
    if (!recs.empty()) {
      EXPECT_LT(recs.back().position, after);
    }
  }
  stop = true;
  writer.join();
}

}  // namespace
}  // namespace synclog::test
