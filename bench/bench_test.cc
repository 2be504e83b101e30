// Tests of synclog-bench: its parts (histogram, record format, units, the
// verifier catching a broken log) and a tiny end-to-end sweep whose JSON
// lines must carry every field and "verified".
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "fio.h"
#include "histogram.h"
#include "options.h"
#include "record.h"
#include "report.h"
#include "rocksdb.h"
#include "runner.h"
#include "scratch_dir.h"
#include "sweep.h"
#include "synclog/log.h"
#include "units.h"
#include "verify.h"
#include "writer.h"

namespace bench {
namespace {

struct Ran {
  int status = -1;
  std::string out;  // stdout and stderr
};

Ran run(const std::string& args) {
  Ran r;
  const std::string cmd = std::string(SYNCLOG_BENCH_BIN) + " " + args + " 2>&1";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) r.out.append(buf, n);
  const int st = ::pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST(Histogram, PercentilesWithinBucketPrecision) {
  Histogram h;
  for (uint64_t v = 1; v <= 100000; ++v) h.record(v * 1000);  // 1 us .. 100 ms
  EXPECT_EQ(h.count(), 100000u);
  EXPECT_EQ(h.min(), 1000u);
  EXPECT_EQ(h.max(), 100000000u);
  EXPECT_NEAR(h.mean(), 50000500.0, 1.0);
  for (double q : {0.5, 0.95, 0.99, 0.999}) {
    const double want = q * 100000 * 1000;
    EXPECT_NEAR(static_cast<double>(h.percentile(q)), want, want / 100) << q;
  }
  EXPECT_EQ(h.percentile(1.0), h.max());
}

TEST(Histogram, SmallValuesAreExactAndBucketsAreContiguous) {
  for (uint64_t v = 0; v < 128; ++v) EXPECT_EQ(Histogram::index_of(v), v);
  for (uint64_t v = 1; v < (1u << 20); v = v * 3 / 2 + 1) {
    const size_t i = Histogram::index_of(v);
    EXPECT_LE(v, Histogram::upper_edge(i));
    if (i > 0) {
      EXPECT_GT(v, Histogram::upper_edge(i - 1)) << v;
    }
  }
}

TEST(Histogram, MergeAddsCounts) {
  Histogram a, b;
  a.record(10);
  b.record(1000000);
  b.record(20);
  a.merge(b);
  EXPECT_EQ(a.count(), 3u);
  EXPECT_EQ(a.min(), 10u);
  EXPECT_EQ(a.max(), 1000000u);
}

TEST(Record, RoundTripsAndCatchesDamage) {
  RecordWriter w(3, 4096);
  std::vector<std::vector<std::byte>> patterns;
  for (uint32_t t = 0; t < 4; ++t) patterns.push_back(make_pattern(t, 4096));
  for (size_t len : {size_t{32}, size_t{4096}, size_t{100}, size_t{33}}) {
    auto rec = w.next(len, len);
    std::vector<std::byte> copy(rec.begin(), rec.end());
    ParsedRecord p;
    ASSERT_EQ(check_record(copy, patterns, &p), "") << len;
    EXPECT_EQ(p.thread, 3u);
    EXPECT_EQ(p.seq, len);
    for (size_t at : {size_t{0}, size_t{9}, size_t{20}, len / 2 + 12, len - 1}) {
      auto bad = copy;
      bad[at] ^= std::byte{1};
      EXPECT_NE(check_record(bad, patterns, &p), "") << "flip at " << at << " of " << len;
    }
  }
}

// The text payload: log lines (printable, newline-separated key=value
// pairs), the same bytes for the same thread, verified like random records,
// and never taken for another payload's record.
TEST(Record, TextPayloadIsLogLinesAndVerifies) {
  const auto text = make_pattern(2, 4096, Payload::text);
  ASSERT_EQ(text.size(), 4096u);
  EXPECT_EQ(text, make_pattern(2, 4096, Payload::text));
  EXPECT_NE(text, make_pattern(3, 4096, Payload::text));
  const std::string s(reinterpret_cast<const char*>(text.data()), text.size());
  for (char c : s) ASSERT_TRUE(c == '\n' || (c >= ' ' && c <= '~')) << int(c);
  EXPECT_EQ(s.rfind("2026-12-04T10:", 0), 0u) << s.substr(0, 80);
  for (const char* word : {" svc=", " op=", " key=", " status=", " dur_us=", " bytes="}) {
    EXPECT_NE(s.find(word), std::string::npos) << word;
  }
  EXPECT_GT(std::count(s.begin(), s.end(), '\n'), 30);  // about 100 bytes a line
  // A shorter pattern is a prefix of a longer one, as records need.
  const auto short_text = make_pattern(2, 300, Payload::text);
  EXPECT_TRUE(std::equal(short_text.begin(), short_text.end(), text.begin()));

  RecordWriter w(1, 4096, Payload::text);
  std::vector<std::vector<std::byte>> text_patterns, random_patterns;
  for (uint32_t t = 0; t < 2; ++t) {
    text_patterns.push_back(make_pattern(t, 4096, Payload::text));
    random_patterns.push_back(make_pattern(t, 4096, Payload::random));
  }
  for (size_t len : {size_t{32}, size_t{128}, size_t{4096}}) {
    auto rec = w.next(7, len);
    ParsedRecord p;
    EXPECT_EQ(check_record(rec, text_patterns, &p), "") << len;
    if (len > 32) {
      EXPECT_NE(check_record(rec, random_patterns, &p), "") << len;
    }
  }
  EXPECT_EQ(parse_payload("text"), Payload::text);
  EXPECT_EQ(parse_payload("random"), Payload::random);
  EXPECT_FALSE(parse_payload("json").has_value());
}

TEST(Units, ParseAndFormat) {
  uint64_t n = 0;
  EXPECT_EQ(parse_bytes("4KiB", &n), "");
  EXPECT_EQ(n, 4096u);
  EXPECT_EQ(parse_bytes("32m", &n), "");
  EXPECT_EQ(n, 32u << 20);
  EXPECT_NE(parse_bytes("4 parsecs", &n), "");
  double s = 0;
  EXPECT_EQ(parse_seconds("300ms", &s), "");
  EXPECT_DOUBLE_EQ(s, 0.3);
  EXPECT_NE(parse_seconds("soon", &s), "");
  EXPECT_EQ(format_bytes(4096), "4KiB");
  EXPECT_EQ(format_bytes(100), "100B");
}

// Writes records for thread 0 with the given seqs into a fresh log and
// returns its config and what a run would have recorded, claiming `acked`
// acknowledged appends. `release_at`: release the segments before the
// record with that index.
struct Written {
  synclog::Config config;
  Measurement m;
};

Written write_log(const std::filesystem::path& dir, const std::vector<uint64_t>& seqs,
                  uint64_t acked, bool flip_one = false, size_t release_at = SIZE_MAX) {
  Written w;
  // msync: the segment and record counts below assume mmap segments (no
  // padding per sync).
  auto config = synclog::Config::parse("backend=msync,mode=batch,segment_size=64KiB");
  EXPECT_TRUE(config.has_value());
  config->dir = dir;
  w.config = *config;
  auto log = synclog::Log::open(*config);
  EXPECT_TRUE(log.has_value()) << log.error().describe();
  RecordWriter writer(0, 256);
  std::vector<std::pair<uint64_t, uint64_t>> starts;
  for (size_t i = 0; i < seqs.size(); ++i) {
    auto rec = writer.next(seqs[i], 256);
    std::vector<std::byte> copy(rec.begin(), rec.end());
    if (flip_one && i == seqs.size() / 2) copy[100] ^= std::byte{0x40};
    auto pos = (*log)->append(copy);
    if (!pos) {
      ADD_FAILURE() << pos.error().describe();
      break;
    }
    if (starts.empty() || starts.back().first != pos->segment()) {
      starts.emplace_back(pos->segment(), seqs[i]);
    }
    if (i == release_at) {
      EXPECT_TRUE((*log)->release_before(*pos).has_value());
    }
  }
  w.m.segments_released = (*log)->stats().segments_released;
  EXPECT_TRUE((*log)->close().has_value());
  w.m.appended = {acked};
  w.m.unacked = {0};
  w.m.segment_starts = {starts};
  return w;
}

std::vector<uint64_t> iota(uint64_t n) {
  std::vector<uint64_t> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

TEST(Verify, AcceptsAnIntactLog) {
  ScratchDir dir("synclog-bench-test-ok");
  auto w = write_log(dir.path(), {0, 1, 2, 3, 4}, 5);
  const auto v = verify_log(w.config, w.m, 256);
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_EQ(v.records, 5u);
}

TEST(Verify, CatchesAHole) {
  ScratchDir dir("synclog-bench-test-hole");
  auto w = write_log(dir.path(), {0, 1, 3, 4}, 5);
  const auto v = verify_log(w.config, w.m, 256);
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.message.find("seq 2 was expected"), std::string::npos) << v.message;
}

TEST(Verify, CatchesMissingAcknowledgedRecords) {
  ScratchDir dir("synclog-bench-test-missing");
  auto w = write_log(dir.path(), {0, 1, 2}, 5);
  const auto v = verify_log(w.config, w.m, 256);
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.message.find("missing"), std::string::npos) << v.message;
}

TEST(Verify, CatchesARecordNeverAppended) {
  ScratchDir dir("synclog-bench-test-extra");
  auto w = write_log(dir.path(), {0, 1, 2, 3}, 2);
  const auto v = verify_log(w.config, w.m, 256);
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.message.find("never appended"), std::string::npos) << v.message;
}

TEST(Verify, CatchesDamagedPayload) {
  ScratchDir dir("synclog-bench-test-damaged");
  auto w = write_log(dir.path(), {0, 1, 2, 3}, 4, /*flip_one=*/true);
  const auto v = verify_log(w.config, w.m, 256);
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.message.find("damaged"), std::string::npos) << v.message;
}

TEST(Verify, ReleasedSegmentsAreAPrefixAndTheRestIsChecked) {
  ScratchDir dir("synclog-bench-test-released");
  auto w = write_log(dir.path(), iota(1500), 1500, false, /*release_at=*/1000);
  ASSERT_GT(w.m.segments_released, 0u);
  auto v = verify_log(w.config, w.m, 256);
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_LT(v.records, 1500u);
  EXPECT_GT(v.records, 400u);

  // Had nothing been released, the missing front would be lost records.
  w.m.segments_released = 0;
  v = verify_log(w.config, w.m, 256);
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.message.find("only 0 were released"), std::string::npos) << v.message;
}

TEST(Cli, BadFlagAndBadValuesAreClearErrors) {
  auto r = run("--no-such-flag");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("no-such-flag"), std::string::npos) << r.out;

  r = run("--threads 0 --list");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--threads"), std::string::npos) << r.out;

  r = run("--mode sometimes --list");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("'mode'"), std::string::npos) << r.out;  // Config::parse names the key

  r = run("--config interval=soon --list");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("'interval'"), std::string::npos) << r.out;

  r = run("--help");
  EXPECT_EQ(r.status, 0);
  for (const char* flag : {"--media",       "--threads",   "--backend",      "--segment-kind",
                           "--mode",        "--size",      "--segment-size", "--sync-threads",
                           "--queue-depth", "--config",    "--duration",     "--ops",
                           "--warmup",      "--max-bytes", "--out",          "--json",
                           "--csv",         "--plot",      "--fio",          "--fio-media",
                           "--budget",      "--metrics",   "--rocksdb",      "--rocksdb-runtime",
                           "--inflight",    "--batch",     "--payload",      "--compression",
                           "--encryption"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  }
}

// Parses a command line in-process, as main() does.
std::optional<Options> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "synclog-bench");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  int code = 0;
  return parse_options(static_cast<int>(argv.size()), argv.data(), &code);
}

TEST(Cli, MetricsAxisMakesAnOnAndAnOffPointPerCombination) {
  auto options =
      parse({"--media", "ram=/dev/shm/synclog-bench-test-none", "--backend", "msync", "--mode",
             "periodic,batch", "--size", "128", "--threads", "1,4", "--metrics", "on,off"});
  ASSERT_TRUE(options.has_value());
  const Plan plan = make_plan(*options, /*dry=*/true);
  ASSERT_EQ(plan.points.size(), 8u);   // 2 modes x 2 metrics x 2 thread counts
  std::map<std::string, int> on, off;  // label -> points
  for (const auto& p : plan.points) {
    const std::string config = p.config.to_string();
    if (p.config.metrics) {
      ++on[p.label()];
      EXPECT_NE(p.axes.find("metrics=true"), std::string::npos) << p.axes;
      EXPECT_NE(config.find("metrics=true"), std::string::npos) << config;
    } else {
      ++off[p.label()];
      EXPECT_NE(p.axes.find("metrics=false"), std::string::npos) << p.axes;
      EXPECT_NE(config.find("metrics=false"), std::string::npos) << config;
    }
  }
  EXPECT_EQ(on.size(), 4u);
  EXPECT_EQ(on, off);  // the same four combinations, once each

  // Unset, the axis leaves Config's default alone: one point per combination.
  options = parse({"--media", "ram=/dev/shm/synclog-bench-test-none", "--backend", "msync",
                   "--mode", "batch", "--size", "128", "--threads", "1"});
  ASSERT_TRUE(options.has_value());
  const Plan one = make_plan(*options, /*dry=*/true);
  ASSERT_EQ(one.points.size(), 1u);
  EXPECT_TRUE(one.points[0].config.metrics);
  EXPECT_EQ(one.points[0].axes.find("metrics"), std::string::npos);

  auto r = run("--metrics sometimes --list");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--metrics"), std::string::npos) << r.out;
}

TEST(Cli, InflightAndBatchAxesCrossTheOtherAxes) {
  auto options =
      parse({"--media", "ram=/dev/shm/synclog-bench-test-none", "--backend", "msync", "--mode",
             "batch", "--size", "128", "--threads", "2", "--inflight", "0,4", "--batch", "1,3"});
  ASSERT_TRUE(options.has_value());
  EXPECT_EQ(options->jobs[0].inflight, (std::vector<uint32_t>{0, 4}));
  EXPECT_EQ(options->jobs[0].batch, (std::vector<uint32_t>{1, 3}));
  const Plan plan = make_plan(*options, /*dry=*/true);
  std::vector<std::string> labels;
  for (const auto& p : plan.points) labels.push_back(p.label());
  EXPECT_EQ(labels,
            (std::vector<std::string>{
                "ram msync/mmap batch 128B x2", "ram msync/mmap batch 128B x2 b3",
                "ram msync/mmap batch 128B x2 qd4", "ram msync/mmap batch 128B x2 qd4 b3"}));

  // Unset: blocking single appends, as before the axes existed.
  options = parse({"--media", "ram=/dev/shm/synclog-bench-test-none", "--backend", "msync"});
  ASSERT_TRUE(options.has_value());
  EXPECT_EQ(options->jobs[0].inflight, (std::vector<uint32_t>{0}));
  EXPECT_EQ(options->jobs[0].batch, (std::vector<uint32_t>{1}));
}

TEST(Cli, BadInflightAndBatchValuesNameTheFlag) {
  for (const char* args : {"--inflight x --list", "--inflight=-1 --list", "--inflight 4.5 --list",
                           "--inflight 70000 --list"}) {
    const auto r = run(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("--inflight:"), std::string::npos) << args << "\n" << r.out;
  }
  for (const char* args : {"--batch 0 --list", "--batch two --list", "--batch 70000 --list"}) {
    const auto r = run(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("--batch:"), std::string::npos) << args << "\n" << r.out;
  }
  // A batch that cannot fit in one record is refused before anything runs.
  const auto r =
      run("--media ram=/dev/shm/synclog-bench-test-none --backend msync --size 4KiB "
          "--config segment_size=64KiB --batch 16 --list");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--batch 16"), std::string::npos) << r.out;
}

TEST(Runner, WriterFailureCatchesLostRepeatedAndFailedCompletions) {
  auto writer = [](uint64_t calls, uint64_t fired, uint64_t acked) {
    auto w = std::make_unique<Writer>();
    w->calls = calls;
    w->submitted = calls * 3;
    w->acks.completed.store(fired);
    w->done.store(acked);
    return w;
  };
  EXPECT_EQ(writer_failure(*writer(4, 4, 12)), "");
  EXPECT_NE(writer_failure(*writer(4, 3, 9)).find("3 fired for 4"), std::string::npos);
  EXPECT_NE(writer_failure(*writer(4, 5, 12)).find("5 fired for 4"), std::string::npos);
  EXPECT_NE(writer_failure(*writer(4, 4, 9)).find("9 of 12 records"), std::string::npos);
  auto w = writer(4, 4, 12);
  w->acks.misorder = "completion of call 2 fired when call 3 was due";
  EXPECT_NE(writer_failure(*w).find("call 2"), std::string::npos);
  w = writer(4, 4, 6);
  w->acks.error = synclog::Error{synclog::Errc::failed, "sync failed"};
  EXPECT_NE(writer_failure(*w).find("sync failed"), std::string::npos);
}

// In-process, so the Measurement itself is checked: every record of every
// append_batch_async() call acknowledged once, timed once, then replayed.
TEST(Runner, AsyncBatchesCountRecordsAndVerify) {
  ScratchDir dir("synclog-bench-test-async");
  auto config = synclog::Config::parse("backend=msync,mode=batch");
  ASSERT_TRUE(config.has_value());
  config->dir = dir.path();
  Point p;
  p.threads = 2;
  p.size = SizeSpec{64, 200};
  p.ops = 1001;  // 501 + 500: each thread ends on a short batch
  p.inflight = 4;
  p.batch = 3;
  p.config = *config;
  auto m = run_point(p, *config);
  ASSERT_TRUE(m.has_value()) << m.error().describe();
  EXPECT_EQ(m->errors, 0u) << m->error;
  EXPECT_EQ(m->ops, 1001u);
  EXPECT_EQ(m->latency.count(), 1001u);
  EXPECT_EQ(m->appended, (std::vector<uint64_t>{501, 500}));
  EXPECT_EQ(m->unacked, (std::vector<uint64_t>{0, 0}));
  const auto v = verify_log(*config, *m, p.size.max);
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_EQ(v.records, 1001u);

  // A record the run claims was acknowledged but is not in the log fails.
  m->appended[1] += 1;
  EXPECT_FALSE(verify_log(*config, *m, p.size.max).ok);
}

TEST(Runner, PositionDistanceCountsSegmentTailsNotHeaders) {
  using synclog::Position;
  constexpr uint64_t kSeg = 1000;
  EXPECT_EQ(position_distance(Position(3, 64), Position(3, 64), kSeg), 0u);
  EXPECT_EQ(position_distance(Position(3, 64), Position(3, 200), kSeg), 136u);
  // To the end of segment 3, then segment 4 from offset 64.
  EXPECT_EQ(position_distance(Position(3, 900), Position(4, 64), kSeg), 100u);
  EXPECT_EQ(position_distance(Position(3, 900), Position(4, 80), kSeg), 116u);
  // Two whole segments between, each less its header.
  EXPECT_EQ(position_distance(Position(3, 900), Position(6, 80), kSeg), 100u + 2 * 936u + 16u);
}

// Stored bytes per record from the positions: a record's framing (8 bytes,
// padded to 8) plus its share of the sync markers and segment tails.
TEST(Runner, StoredBytesPerRecordIsTheFramedSize) {
  ScratchDir dir("synclog-bench-test-stored");
  auto config = synclog::Config::parse("backend=msync,mode=periodic,segment_size=256KiB");
  ASSERT_TRUE(config.has_value());
  config->dir = dir.path();
  Point p;
  p.threads = 2;
  p.size = SizeSpec{1000, 1000};  // framed: 1008 bytes
  p.ops = 2000;                   // about 8 segments: tails and switches count
  p.payload = Payload::text;
  p.config = *config;
  auto m = run_point(p, *config);
  ASSERT_TRUE(m.has_value()) << m.error().describe();
  ASSERT_EQ(m->errors, 0u) << m->error;
  EXPECT_EQ(m->stored_records, 2000u);
  // Each segment wastes under one record at its end, and periodic syncs
  // add a 16-byte marker now and then: within 1% of the framed size.
  EXPECT_GE(m->stored_per_record, 1008.0);
  EXPECT_LE(m->stored_per_record, 1008.0 * 1.01);
  const auto v = verify_log(*config, *m, p.size.max, Payload::text);
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_EQ(v.records, 2000u);
  // The same log checked against the other payload's patterns fails.
  EXPECT_FALSE(verify_log(*config, *m, p.size.max, Payload::random).ok);
}

TEST(Sweep, KeyFileIsPrivateRandomAndOneLine) {
  ScratchDir dir("synclog-bench-test-key");
  const auto a = dir.path() / "a.key";
  const auto b = dir.path() / "b.key";
  write_key_file(a);
  write_key_file(b);
  namespace fs = std::filesystem;
  EXPECT_EQ(fs::status(a).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  auto read = [](const fs::path& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  const std::string ka = read(a), kb = read(b);
  ASSERT_EQ(ka.size(), 2u + 64u + 1u) << ka;
  EXPECT_EQ(ka.substr(0, 2), "1 ");
  EXPECT_EQ(ka.back(), '\n');
  for (char c : ka.substr(2, 64)) EXPECT_TRUE(std::isxdigit(c) && !std::isupper(c)) << ka;
  EXPECT_NE(ka, kb);  // from /dev/urandom, not a fixed key
  EXPECT_THROW(write_key_file(dir.path() / "missing" / "c.key"), std::runtime_error);
}

// none leaves Config alone; anything else is set, and a rejection names the
// key and value (whether the library lacks the key or the value).
TEST(Sweep, ApplyTransformsSetsOnlyWhatIsNotNone) {
  Point p;
  synclog::Config c;
  const std::string before = c.to_string();
  ASSERT_TRUE(apply_transforms(p, c, "/nonexistent/key").has_value());
  EXPECT_EQ(c.to_string(), before);
  p.encryption = "rot13";
  const auto r = apply_transforms(p, c, "/nonexistent/key");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("encryption=rot13 is not accepted"), std::string::npos)
      << r.error().message;
}

// none sets no Config key; a value the library rejects (an unknown one, or
// any one before the library has the key) becomes one skip row per job and
// medium naming the key, and the sweep still plans the rest.
TEST(Cli, CompressionEncryptionAndPayloadAxes) {
  auto options =
      parse({"--media", "ram=/dev/shm/synclog-bench-test-none", "--backend", "msync", "--mode",
             "batch", "--size", "128", "--threads", "1,2", "--payload", "random,text"});
  ASSERT_TRUE(options.has_value());
  EXPECT_EQ(options->jobs[0].compressions, (std::vector<std::string>{"none"}));
  EXPECT_EQ(options->jobs[0].encryptions, (std::vector<std::string>{"none"}));
  Plan plan = make_plan(*options, /*dry=*/true);
  std::vector<std::string> labels;
  for (const auto& p : plan.points) {
    labels.push_back(p.label());
    EXPECT_EQ(p.compression, "none");
    EXPECT_EQ(p.config_text, p.config.to_string());
  }
  EXPECT_EQ(labels, (std::vector<std::string>{
                        "ram msync/mmap batch 128B x1", "ram msync/mmap batch 128B x2",
                        "ram msync/mmap batch 128B x1 text", "ram msync/mmap batch 128B x2 text"}));
  EXPECT_TRUE(plan.skips.empty());

  options = parse({"--media", "ram=/dev/shm/synclog-bench-test-none", "--backend", "msync",
                   "--mode", "batch", "--size", "128", "--threads", "1,2", "--compression",
                   "none,bogus", "--encryption", "none,rot13"});
  ASSERT_TRUE(options.has_value());
  plan = make_plan(*options, /*dry=*/true);
  EXPECT_EQ(plan.points.size(), 2u);  // none x none only
  ASSERT_EQ(plan.skips.size(), 2u);
  std::string messages;
  for (const auto& k : plan.skips) {
    EXPECT_EQ(k.backend, "*");
    messages += k.message + "\n";
  }
  EXPECT_NE(messages.find("compression=bogus is not accepted"), std::string::npos) << messages;
  EXPECT_NE(messages.find("encryption=rot13 is not accepted"), std::string::npos) << messages;

  // Every value rejected: the sweep runs, shows the skip rows, exits 0.
  ScratchDir dir("synclog-bench-test-rejected");
  const auto r = run("--media ram=" + dir.path().string() +
                     " --backend msync --mode batch --size 128 --threads 1 --compression bogus"
                     " --duration 100ms --fio off --rocksdb off --quiet");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("skipped: compression=bogus is not accepted"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 compression/encryption values skipped"), std::string::npos) << r.out;

  for (const char* args : {"--payload json --list", "--compression '' --list"}) {
    const auto bad = run(args);
    EXPECT_EQ(bad.status, 2) << args << "\n" << bad.out;
    EXPECT_NE(bad.out.find(std::string(args).substr(0, std::string(args).find(' ')) + ":"),
              std::string::npos)
        << args << "\n"
        << bad.out;
  }
}

TEST(Report, MetricsPairsMatchPointsThatDifferOnlyInMetrics) {
  auto row = [](size_t index, uint32_t threads, bool metrics, double ops) {
    Row r;
    r.index = index;
    r.job = "default";
    r.medium = "ram";
    r.backend = "msync";
    r.segment_kind = "mmap";
    r.mode = "periodic";
    r.size = "128B";
    r.threads = threads;
    r.status = "verified";
    r.metrics = metrics;
    r.config = std::string("mode=periodic,metrics=") + (metrics ? "true" : "false") + ",tail=pad";
    r.ops_per_s = ops;
    return r;
  };
  const std::vector<Row> rows{row(1, 1, true, 900), row(2, 4, true, 2000), row(3, 1, false, 1000),
                              row(4, 4, false, 2000)};
  const auto pairs = metrics_pairs(rows);
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].on, 1u);
  EXPECT_EQ(pairs[0].off, 3u);
  EXPECT_DOUBLE_EQ(pairs[0].ratio, 0.9);
  EXPECT_NEAR(pairs[0].overhead_pct, 10.0, 1e-9);
  EXPECT_EQ(pairs[1].on, 2u);
  EXPECT_EQ(pairs[1].off, 4u);
  EXPECT_NE(format_metrics_overhead(pairs).find("10.0%"), std::string::npos);
  EXPECT_TRUE(metrics_pairs({rows[0], rows[1]}).empty());
}

// Captured from db_bench 7.8.3 (Debian rocksdb-tools), fillrandom --sync=true
// --threads=4 --value_size=112 --duration=1 on ext4; the rate is all threads'.
constexpr const char* kDbBenchOut = R"(Set seed to 1796047676913507 because --seed was 0
Initializing RocksDB Options from the specified file
Initializing RocksDB Options from command-line flags
Integrated BlobDB: blob cache disabled
Keys:       16 bytes each (+ 0 bytes user-defined timestamp)
Values:     112 bytes each (56 bytes after compression)
Entries:    1000000
WARNING: Assertions are enabled; benchmarks unnecessarily slow
------------------------------------------------
DB path: [bench-data/dbtest/rocksdb-4]
fillrandom   :     345.114 micros/op 11575 ops/sec 1.036 seconds 11996 operations;    1.4 MB/s
)";

TEST(RocksDb, ParsesDbBenchSummaryLine) {
  double ops = 0, micros = 0;
  EXPECT_EQ(parse_db_bench(kDbBenchOut, "fillrandom", &ops, &micros), "");
  EXPECT_DOUBLE_EQ(ops, 11575);
  EXPECT_DOUBLE_EQ(micros, 345.114);

  // "fillrandom" alone in other lines, or another benchmark's line, is not it.
  EXPECT_NE(parse_db_bench("fillrandomx : 1.0 micros/op 5 ops/sec\nDB path: [fillrandom]\n",
                           "fillrandom", &ops, &micros)
                .find("no 'fillrandom :' summary line"),
            std::string::npos);
  EXPECT_NE(parse_db_bench("fillrandom   : lots of micros/op\n", "fillrandom", &ops, &micros)
                .find("cannot read"),
            std::string::npos);
}

// The timed job of fio 3.33's --output-format=json for
// fio-profiles/sync-write-fdatasync.fio (bs=2048), trimmed to what is read.
constexpr const char* kFioJson = R"(note: both iodepth >= 1 and synchronous I/O engine are selected
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {"jobname" : "layout", "write" : {"iops" : 20.0, "bw_bytes" : 20971520,
      "clat_ns" : {"mean" : 1000.0, "percentile" : {"99.000000" : 5000}}}},
    {
      "jobname" : "sync-write-fdatasync",
      "write" : {
        "iops" : 877.243,
        "bw_bytes" : 1796593,
        "clat_ns" : {"min" : 2023, "max" : 871246, "mean" : 44867.953303, "N" : 878,
          "percentile" : {"50.000000" : 33536, "99.000000" : 222208, "99.900000" : 872448}}
      },
      "sync" : {
        "total_ios" : 0,
        "lat_ns" : {"min" : 58788, "max" : 8067382, "mean" : 1090699.752847, "N" : 878,
          "percentile" : {"50.000000" : 112128, "99.000000" : 5013504, "99.900000" : 8093696}}
      }
    }
  ]
})";

TEST(Fio, ParsesMeansAndP99s) {
  FioRun r;
  ASSERT_EQ(parse_fio_json(kFioJson, &r), "");
  EXPECT_DOUBLE_EQ(r.iops, 877.243);
  EXPECT_DOUBLE_EQ(r.bw_bytes, 1796593);
  EXPECT_NEAR(r.write_lat_us, 44.868, 1e-3);
  EXPECT_NEAR(r.sync_lat_us, 1090.700, 1e-3);
  EXPECT_DOUBLE_EQ(r.write_p99_us, 222.208);
  EXPECT_DOUBLE_EQ(r.sync_p99_us, 5013.504);

  // A profile without fdatasync has no sync p99; a broken document is an error.
  FioRun bw;
  ASSERT_EQ(parse_fio_json(R"({"jobs":[{"write":{"iops":10,"bw_bytes":1e7,
                              "clat_ns":{"mean":5000,"percentile":{"99.000000":9000}}}}]})",
                           &bw),
            "");
  EXPECT_DOUBLE_EQ(bw.write_p99_us, 9.0);
  EXPECT_EQ(bw.sync_p99_us, 0.0);
  FioRun bad;
  EXPECT_EQ(parse_fio_json(R"({"jobs":[]})", &bad), "fio's JSON holds no jobs");
  EXPECT_NE(parse_fio_json("fio: no such file", &bad).find("cannot read fio's JSON"),
            std::string::npos);
}

TEST(Cli, JobFileSectionsBecomeJobs) {
  ScratchDir dir("synclog-bench-test-jobfile");
  const auto ini = dir.path() / "jobs.ini";
  std::ofstream(ini) << "# two jobs\n[global]\nmedia=ram=" << dir.path().string()
                     << "\nthreads=1,2\nbackend=msync\n[small]\nmode=batch\nsize=128\n"
                     << "[large]\nmode=periodic\nsize=4KiB\nthreads=8\n";
  auto r = run(ini.string() + " --list");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("ram msync/mmap batch 128B x1  [small]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ram msync/mmap periodic 4KiB x8  [large]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 points"), std::string::npos) << r.out;

  std::ofstream(ini) << "[job]\nthreds=4\n";
  r = run(ini.string() + " --list");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("jobs.ini:2: unknown key 'threds'"), std::string::npos) << r.out;
}

TEST(TinySweep, JsonLinesCarryEveryFieldAndVerified) {
  ScratchDir dir("synclog-bench-test-sweep");
  auto r = run("--media ram=" + dir.path().string() +
               " --threads 1,2 --duration 300ms --warmup 50ms --backend msync --mode batch"
               " --size 128 --json --fio off --rocksdb off --quiet");
  ASSERT_EQ(r.status, 0) << r.out;

  std::istringstream lines(r.out);
  std::string line;
  int runs = 0;
  std::vector<nlohmann::json> points;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(line)) << "not JSON: " << line;
    ASSERT_TRUE(j.contains("type")) << line;
    if (j["type"] == "run") {
      ++runs;
      EXPECT_EQ(j["media"][0]["fs"], "tmpfs");
    }
    if (j["type"] == "point") points.push_back(j);
  }
  EXPECT_EQ(runs, 1);
  ASSERT_EQ(points.size(), 2u) << r.out;
  for (size_t i = 0; i < points.size(); ++i) {
    const auto& p = points[i];
    SCOPED_TRACE(p.dump());
    EXPECT_EQ(p["status"], "verified");
    EXPECT_EQ(p["verified"], true);
    EXPECT_EQ(p["threads"], i + 1);
    EXPECT_EQ(p["backend"], "msync");
    EXPECT_EQ(p["segment_kind"], "mmap");
    EXPECT_EQ(p["mode"], "batch");
    EXPECT_EQ(p["record_size"]["min"], 128);
    EXPECT_EQ(p["medium"]["name"], "ram");
    EXPECT_EQ(p["errors"], 0);
    for (const char* key :
         {"ops", "ops_per_s", "mb_per_s", "syncs", "syncs_per_s", "records_per_sync",
          "cpu_user_pct", "cpu_sys_pct", "elapsed_s", "verified_records", "config", "padding_bytes",
          "payload", "compression", "encryption", "stored_bytes_per_record"}) {
      EXPECT_TRUE(p.contains(key)) << key;
    }
    for (const char* q : {"mean", "p50", "p95", "p99", "p99.9", "max"}) {
      ASSERT_TRUE(p["latency_us"].contains(q)) << q;
      EXPECT_GT(p["latency_us"][q].get<double>(), 0.0) << q;
    }
    EXPECT_GT(p["ops"].get<uint64_t>(), 0u);
    EXPECT_GE(p["verified_records"].get<uint64_t>(), p["ops"].get<uint64_t>());
    EXPECT_GT(p["syncs"].get<uint64_t>(), 0u);
    EXPECT_LE(p["latency_us"]["p50"].get<double>(), p["latency_us"]["p99"].get<double>());
    EXPECT_LE(p["latency_us"]["p99"].get<double>(), p["latency_us"]["max"].get<double>());
    // 128 B records framed in 136 bytes, plus a 24-byte sync marker per
    // batch-mode sync, at most one per record.
    EXPECT_EQ(p["payload"], "random");
    EXPECT_GE(p["stored_bytes_per_record"].get<double>(), 136.0);
    EXPECT_LE(p["stored_bytes_per_record"].get<double>(), 136.0 + 24.0 + 1.0);
  }
  // The point directories are gone; the medium directory stays.
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(TinySweep, InflightAndBatchPointsVerify) {
  ScratchDir dir("synclog-bench-test-inflight");
  auto r = run("--media ram=" + dir.path().string() +
               " --threads 2 --inflight 4 --batch 3 --duration 300ms --warmup 50ms --backend msync"
               " --mode batch,periodic --size 128 --json --fio off --rocksdb off --quiet");
  ASSERT_EQ(r.status, 0) << r.out;
  std::istringstream lines(r.out);
  std::string line;
  std::vector<nlohmann::json> points;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(line)) << "not JSON: " << line;
    if (j["type"] == "point") points.push_back(j);
  }
  ASSERT_EQ(points.size(), 2u) << r.out;
  for (const auto& p : points) {
    SCOPED_TRACE(p.dump());
    EXPECT_EQ(p["status"], "verified");
    EXPECT_EQ(p["inflight"], 4);
    EXPECT_EQ(p["batch"], 3);
    EXPECT_EQ(p["errors"], 0);
    const auto ops = p["ops"].get<uint64_t>();
    EXPECT_GT(ops, 0u);
    EXPECT_EQ(ops % 3, 0u);  // records, whole batches of them, not calls
    EXPECT_GE(p["verified_records"].get<uint64_t>(), ops);
    EXPECT_GT(p["latency_us"]["p50"].get<double>(), 0.0);
  }
}

}  // namespace
}  // namespace bench
