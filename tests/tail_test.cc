#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "test_util.h"

namespace synclog::test {
namespace {

TEST(Tail, FollowsAWriterAcrossSegmentSwitches) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.mode = SyncMode::group;
  cfg.window = std::chrono::microseconds(200);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value());
  for (int i = 0; i < 100; ++i) ASSERT_TRUE((*log)->append(make_record(0, i, 500)).has_value());
  constexpr int kTotal = 3000;  // ~1.5 MiB: several 256 KiB segments
  std::thread writer([&] {
    for (int i = 100; i < kTotal; ++i) {
      ASSERT_TRUE((*log)->append(make_record(0, i, 500)).has_value());
      if (i % 500 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  auto tailer = (*log)->tail();
  ASSERT_TRUE(tailer.has_value());
  Position last;
  std::set<uint64_t> segments;
  for (int i = 0; i < kTotal; ++i) {
    auto rec = tailer->next(std::chrono::seconds(10));
    ASSERT_TRUE(rec.has_value()) << rec.error().describe();
    ASSERT_TRUE(rec->has_value()) << "timed out at record " << i;
    uint32_t t;
    uint64_t seq;
    const std::string_view bytes(reinterpret_cast<const char*>((*rec)->data.data()),
                                 (*rec)->data.size());
    ASSERT_TRUE(check_record(bytes, &t, &seq));
    ASSERT_EQ(seq, uint64_t(i)) << "at " << (*rec)->position.to_string() << " after "
                                << last.to_string();
    ASSERT_LT(last, (*rec)->position);
    ASSERT_LE((*rec)->position, (*log)->durable());  // only durable records
    last = (*rec)->position;
    segments.insert(last.segment());
  }
  writer.join();
  EXPECT_GE(segments.size(), 4u);
  // Nothing more: a short timeout returns empty, not an error.
  auto none = tailer->next(std::chrono::milliseconds(20));
  ASSERT_TRUE(none.has_value());
  EXPECT_FALSE(none->has_value());
  // A new record arrives.
  ASSERT_TRUE((*log)->append(make_record(0, kTotal, 10)).has_value());
  auto more = tailer->next(std::chrono::seconds(5));
  ASSERT_TRUE(more.has_value() && more->has_value());
}

TEST(Tail, AReleasedSegmentItStillNeedsIsAnError) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.recycle = false;
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value());
  Position first = *(*log)->append(make_record(0, 0, 1000));
  Position p = first;
  for (int i = 1; p.segment() < first.segment() + 3; ++i)
    p = *(*log)->append(make_record(0, i, 1000));
  auto tailer = (*log)->tail();
  ASSERT_TRUE(tailer.has_value());
  ASSERT_TRUE((*log)->release_before(p).has_value());
  auto rec = tailer->next(std::chrono::milliseconds(100));
  ASSERT_FALSE(rec.has_value());
  EXPECT_EQ(rec.error().code, Errc::released) << rec.error().describe();
  // A tailer from the first retained position works.
  auto fresh = (*log)->tail(p);
  ASSERT_TRUE(fresh.has_value());
  auto r2 = fresh->next(std::chrono::milliseconds(100));
  ASSERT_TRUE(r2.has_value() && r2->has_value());
  EXPECT_EQ((*r2)->position, p);
}

// The largest timeouts wait (the deadline saturates), never wrap into the
// past and return at once: the record appended while next() waits comes.
TEST(Tail, TheLargestTimeoutWaits) {
  TempDir dir;
  auto log = Log::open(small_config(dir.path()));
  ASSERT_TRUE(log.has_value());
  auto tailer = (*log)->tail();
  ASSERT_TRUE(tailer.has_value());
  std::atomic<bool> waiting{false};
  std::thread writer([&] {
    // Only to make a wrapped deadline visible: next() is waiting by now
    // (or the record is simply there when it looks).
    while (!waiting.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE((*log)->append(make_record(0, 1, 100)).has_value());
  });
  waiting.store(true);
  auto rec = tailer->next(std::chrono::milliseconds::max());
  writer.join();
  ASSERT_TRUE(rec.has_value()) << rec.error().describe();
  ASSERT_TRUE(rec->has_value()) << "next(milliseconds::max()) returned at once with no record";
  auto waited = (*log)->wait_durable((*rec)->position, std::chrono::nanoseconds::max());
  EXPECT_TRUE(waited.has_value()) << waited.error().describe();
  ASSERT_TRUE((*log)->close().has_value());
}

}  // namespace
}  // namespace synclog::test
