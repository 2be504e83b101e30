// The in-flight slots that let a sync wait for the appends below its target
// belong to each log, grow with the threads appending, and go back when a
// thread exits: no limit on threads over a process's life or at once, and
// a writer stalled in one log never holds up another log's sync.
#include "segments/inflight.h"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "test_util.h"

namespace synclog::test {
namespace {

TEST(Inflight, FiveThousandShortLivedThreadsAppendOverALogsLife) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.mode = SyncMode::periodic;  // no sync wait per append: the threads are the point
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  constexpr int kThreads = 5000;
  constexpr int kWave = 50;
  std::atomic<int> failed{0};
  for (int base = 0; base < kThreads; base += kWave) {
    std::vector<std::thread> wave;
    for (int t = base; t < base + kWave; ++t) {
      wave.emplace_back([&, t] {
        if (!(*log)->append(make_record(static_cast<uint32_t>(t), 0, 32))) ++failed;
      });
    }
    for (auto& th : wave) th.join();
  }
  EXPECT_EQ(failed.load(), 0);
  ASSERT_TRUE((*log)->sync().has_value());
  ASSERT_TRUE((*log)->close().has_value());
  auto replayed = replay_all(cfg);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  EXPECT_EQ(replayed->size(), size_t{kThreads});
}

TEST(Inflight, MoreThanFourThousandThreadsAppendAtOnce) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.mode = SyncMode::periodic;
  cfg.segment_size = 4 << 20;
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  // Every thread holds its slot until all have appended (the old table
  // had 4,096 slots for the whole process).
  const int threads = kThreadSanitized ? 1100 : 4200;
  std::barrier all(threads);
  std::atomic<int> failed{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      if (auto r = (*log)->append(make_record(static_cast<uint32_t>(t), 0, 32)); !r) {
        ++failed;
        ADD_FAILURE() << r.error().describe();
      }
      all.arrive_and_wait();
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(failed.load(), 0);
  ASSERT_TRUE((*log)->close().has_value());
  auto replayed = replay_all(cfg);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  EXPECT_EQ(replayed->size(), static_cast<size_t>(threads));
}

TEST(Inflight, OneThreadAcrossManyLogs) {
  // The same thread appends to log after log (each at whatever address the
  // allocator gives it, often the last one's): it must get a slot of the
  // log at hand each time, never a closed log's.
  for (int i = 0; i < 50; ++i) {
    TempDir dir;
    Config cfg = small_config(dir.path());
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    for (int k = 0; k < 3; ++k) ASSERT_TRUE((*log)->append(make_record(0, k, 32)).has_value());
    ASSERT_TRUE((*log)->close().has_value());
  }
}

TEST(Inflight, StalledWriterOfOneLogDoesNotStallAnothersDrain) {
  seg::inflight::Table a;
  seg::inflight::Table b;
  std::promise<void> in_window;
  std::atomic<bool> release{false};
  // A writer of log A stops between reserving and completing (preempted,
  // or faulting on its page).
  std::thread stalled([&] {
    seg::inflight::Slot& s = a.mine();
    (void)b.mine();  // it has written to B before: it holds a slot there too
    seg::inflight::begin(s);
    in_window.set_value();
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    seg::inflight::end(s);
  });
  in_window.get_future().wait();
  // B's writers come and go; B's drain does not wait for A's writer.
  std::thread other([&] {
    seg::inflight::Slot& s = b.mine();
    seg::inflight::begin(s);
    seg::inflight::end(s);
  });
  other.join();
  auto drained = std::async(std::launch::async, [&] { b.drain(); });
  drained.wait();
  EXPECT_FALSE(release.load());
  // A's drain does wait for it.
  std::atomic<bool> a_drained{false};
  std::thread drainer([&] {
    a.drain();
    a_drained = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(a_drained.load());
  release = true;
  drainer.join();
  stalled.join();
  EXPECT_TRUE(a_drained.load());
}

TEST(Inflight, ThreadOutlivesItsTable) {
  // A thread that appended to a table that is gone exits cleanly (its slot
  // is released into memory it keeps alive), and its next table works.
  auto t = std::make_unique<seg::inflight::Table>();
  std::promise<void> claimed;
  std::promise<void> table_gone;
  std::thread th([&] {
    seg::inflight::begin(t->mine());
    seg::inflight::end(t->mine());
    claimed.set_value();
    table_gone.get_future().wait();
    seg::inflight::Table next;
    seg::inflight::Slot& s = next.mine();
    seg::inflight::begin(s);
    seg::inflight::end(s);
    next.drain();
  });
  claimed.get_future().wait();
  t.reset();
  table_gone.set_value();
  th.join();
}

}  // namespace
}  // namespace synclog::test
