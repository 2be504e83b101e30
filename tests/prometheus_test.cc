// to_prometheus() on the stats of two real logs, written to files that
// tests/prometheus_parse.py (the PrometheusParse test) reads back with
// Prometheus' own Python parser; and the names and values it refuses.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "test_util.h"

namespace synclog::test {
namespace {

namespace fs = std::filesystem;

// Appends from two threads and releases a segment, so that counters,
// gauges and histograms all hold something.
Stats exercise(Log& log, int records) {
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < records; ++i)
        EXPECT_TRUE(log.append(make_record(t, static_cast<uint64_t>(i), 1000)).has_value());
    });
  }
  for (auto& th : threads) th.join();
  auto released = log.release_before(log.durable());
  EXPECT_TRUE(released.has_value()) << released.error().describe();
  // The manager recycles and makes spares in the background after a
  // release: the snapshot is taken once the files stop changing, so that
  // its disk_bytes can be compared with disk_bytes().
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    const Stats s = log.stats();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (s.disk_bytes == log.disk_bytes() && s.spare_files == log.stats().spare_files) return s;
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "disk_bytes in stats() and disk_bytes() never agreed";
      return s;
    }
  }
}

std::string json_figures(const Stats& s) {
  auto f = [](const char* name, uint64_t v) {
    return "\"" + std::string(name) + "\":" + std::to_string(v);
  };
  return "{" + f("appends_total", s.appends) + "," + f("syncs_total", s.syncs) + "," +
         f("segments_released_total", s.segments_released) + "," +
         f("durable_segment", s.durable.segment()) + "," +
         f("durable_offset_bytes", s.durable.offset()) + "," + f("disk_bytes", s.disk_bytes) + "," +
         f("segment_files", s.segment_files) + "," + f("spare_files", s.spare_files) + "," +
         f("append_seconds_count", s.append.count) + "}";
}

TEST(Prometheus, ExpositionOfTwoLogsForTheParser) {
  const fs::path out = SYNCLOG_PROMETHEUS_OUT;
  fs::create_directories(out);
  fs::remove(out / "exposition.txt");
  fs::remove(out / "expected.json");

  TempDir a_dir, b_dir;
  auto a = Log::open(small_config(a_dir.path()));
  auto b = Log::open(small_config(b_dir.path()));
  ASSERT_TRUE(a.has_value()) << a.error().describe();
  ASSERT_TRUE(b.has_value()) << b.error().describe();
  const Stats sa = exercise(**a, 300);
  const Stats sb = exercise(**b, 40);
  // exercise() already compared sa.disk_bytes with disk_bytes() once the
  // files settled; comparing again after b's run would race a spare that
  // a's manager makes meanwhile (seen under TSan in CI).
  EXPECT_GT(sa.segments_released, 0u);

  // The second log's label value needs every escape the format has.
  const std::string odd = "audit \"eu\\west\"\nshard 2";
  auto text = to_prometheus(std::vector<LabeledStats>{
      {{{"log", "orders"}, {"role", "primary"}}, sa}, {{{"log", odd}, {"role", "replica"}}, sb}});
  ASSERT_TRUE(text.has_value()) << text.error().describe();
  EXPECT_NE(text->find("log=\"audit \\\"eu\\\\west\\\"\\nshard 2\""), std::string::npos) << *text;
  std::ofstream(out / "exposition.txt") << *text;
  std::ofstream(out / "expected.json") << "{\"orders\":" << json_figures(sa) << ",\""
                                       << "audit \\\"eu\\\\west\\\"\\nshard 2"
                                       << "\":" << json_figures(sb) << "}\n";

  // The brace form docs/operations.md shows.
  auto braced = to_prometheus({{{{"log", "x"}}, sa}, {{{"log", "y"}}, sb}});
  EXPECT_TRUE(braced.has_value());

  // One log, default prefix, no labels: still valid, names unchanged.
  auto plain = to_prometheus(sa);
  ASSERT_TRUE(plain.has_value());
  EXPECT_NE(plain->find("\nsynclog_append_seconds_bucket{le=\"+Inf\"} " +
                        std::to_string(sa.append.count) + "\n"),
            std::string::npos)
      << *plain;
}

TEST(Prometheus, RefusesWhatTheFormatCannotCarry) {
  const Stats s;
  auto refused = [&](std::string_view prefix, std::vector<MetricLabel> labels,
                     const std::string& says) {
    auto r = to_prometheus(s, prefix, labels);
    ASSERT_FALSE(r.has_value()) << "accepted prefix '" << prefix << "'";
    EXPECT_EQ(r.error().code, Errc::invalid_argument);
    EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
  };
  refused("", {}, "metric prefix ''");
  refused("9lives", {}, "metric prefix '9lives'");
  refused("my-log", {}, "is not a Prometheus metric name");
  refused("ok", {{"log-name", "a"}}, "label name 'log-name'");
  refused("ok", {{"", "a"}}, "label name ''");
  refused("ok", {{"__name__", "a"}}, "reserves");
  refused("ok", {{"le", "a"}}, "'le'");
  refused("ok", {{"log", "a"}, {"log", "b"}}, "given twice");
  refused("ok", {{"log", "bad \xff byte"}}, "not valid UTF-8");
  refused("ok", {{"log", "\xc0\xaf"}}, "not valid UTF-8");  // overlong '/'
  auto same = to_prometheus(std::vector<LabeledStats>{{{{"log", "a"}}, s}, {{{"log", "a"}}, s}});
  ASSERT_FALSE(same.has_value());
  EXPECT_NE(same.error().message.find("same metric labels"), std::string::npos);
  EXPECT_TRUE(to_prometheus(s, "ns:synclog_2", {{"log", "ünïcode ✓"}}).has_value());
}

}  // namespace
}  // namespace synclog::test
