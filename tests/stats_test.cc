#include <gtest/gtest.h>

#include <thread>

#include "metrics/histogram.h"
#include "test_util.h"

namespace synclog::test {
namespace {

TEST(Histogram, QuantilesAreWithinABucket) {
  metrics::Histogram h;
  for (uint64_t v = 1; v <= 100'000; ++v) h.record(v);
  metrics::HistogramData d;
  h.add_to(d);
  EXPECT_EQ(d.count, 100'000u);
  EXPECT_EQ(d.max, 100'000u);
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    const double want = q * 100'000;
    const double got = static_cast<double>(d.quantile(q));
    EXPECT_GE(got, want) << q;
    EXPECT_LE(got, want * 1.13) << q;  // 8 sub-buckets per power of two
  }
}

TEST(Stats, CountsAKnownWorkload) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.mode = SyncMode::batch;
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value());
  constexpr int kThreads = 4, kEach = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i)
        ASSERT_TRUE((*log)->append(make_record(t, i, 100)).has_value());
    });
  }
  for (auto& th : threads) th.join();
  const Stats s = (*log)->stats();
  EXPECT_EQ(s.appends, uint64_t{kThreads * kEach});
  EXPECT_EQ(s.bytes, uint64_t{kThreads * kEach * 100});
  EXPECT_GE(s.syncs, 1u);
  EXPECT_LE(s.syncs, s.appends + 2);
  EXPECT_NEAR(s.records_per_sync, static_cast<double>(s.appends) / static_cast<double>(s.syncs),
              1e-9);
  EXPECT_EQ(s.append.count, s.appends);
  EXPECT_EQ(s.durable_wait.count, s.appends);
  EXPECT_EQ(s.sync.count, s.syncs);
  EXPECT_LE(s.append.p50_ns, s.append.p99_ns);
  EXPECT_LE(s.append.p99_ns, s.append.max_ns);
  EXPECT_GE(s.append.mean_ns, s.durable_wait.mean_ns / 2);
  EXPECT_GE(s.segments_created, 1u);  // the spare behind it is made in the background
  EXPECT_EQ(s.failures, 0u);

  auto exposed = to_prometheus(s);
  ASSERT_TRUE(exposed.has_value());
  const std::string& prom = *exposed;
  EXPECT_NE(prom.find("# TYPE synclog_appends_total counter\nsynclog_appends_total 2000\n"),
            std::string::npos)
      << prom;
  EXPECT_NE(prom.find("synclog_append_seconds_bucket{le=\"+Inf\"} 2000\n"), std::string::npos);
  EXPECT_NE(prom.find("synclog_sync_seconds_count " + std::to_string(s.syncs) + "\n"),
            std::string::npos);
  const std::string json = to_json(s);
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
  EXPECT_NE(json.find("\"appends\":2000,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"append\":{\"count\":2000,"), std::string::npos) << json;
}

TEST(Stats, PeriodicModeSamplesAppendLatencyButCountsEveryAppend) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.mode = SyncMode::periodic;
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value());
  constexpr int kThreads = 3, kEach = 128 * 10 + 7;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i)
        ASSERT_TRUE((*log)->append(make_record(t, i, 64)).has_value());
    });
  }
  for (auto& th : threads) th.join();
  const Stats s = (*log)->stats();
  EXPECT_EQ(s.appends, uint64_t{kThreads * kEach});
  EXPECT_EQ(s.bytes, uint64_t{kThreads * kEach * 64});
  // One in 128 per thread: 10 samples from each thread's 1287 appends.
  EXPECT_EQ(s.append.count, uint64_t{kThreads * 10});
  EXPECT_EQ(s.durable_wait.count, 0u);  // periodic appends do not wait
  EXPECT_GT(s.append.max_ns, 0u);
}

TEST(Stats, MetricsOffRecordsNoLatencies) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.metrics = false;
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE((*log)->append("x").has_value());
  const Stats s = (*log)->stats();
  EXPECT_EQ(s.append.count, 0u);
  EXPECT_GE(s.syncs, 1u);  // rare events are still counted
}

}  // namespace
}  // namespace synclog::test
