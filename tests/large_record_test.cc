// Records above half a segment (config key max_record), written as
// first/middle/last fragments across segments (docs/format.md, "Fragmented
// records"), on every backend: they come back whole from readers, tailers
// and recovery at the positions append returned; a crash never replays a
// part of one nor loses an acknowledged one; a release that takes the
// segment of a record's first fragment takes the whole record.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "crash_sim.h"
#include "segments/format.h"
#include "test_util.h"

namespace synclog::test {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kSegment = 64 << 10;

Config large_config(const fs::path& dir) {
  Config c = small_config(dir);
  c.segment_size = kSegment;
  c.max_record = 300 << 10;  // about five segments
  return c;
}

// Sizes around every edge: one below and above the unfragmented limit, a
// fragment filling a segment exactly, several segments, the maximum.
std::vector<size_t> edge_sizes(const Config& c) {
  const size_t whole = c.max_unfragmented_size();
  const size_t cap = kSegment - seg::kHeaderSize - 2 * seg::kRecordHeaderSize;
  return {whole, whole + 1, cap - 8,          cap,          cap + 1, 2 * cap, 3 * cap + 17,
          100,   0,         c.max_record - 1, c.max_record, 5};
}

TEST(LargeRecord, EveryApiReplaysWholeAtItsPositionAcrossReopen) {
  TempDir dir;
  const Config cfg = large_config(dir.path());
  std::vector<Replayed> want;
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    uint64_t seq = 0;
    for (int round = 0; round < 2; ++round) {
      for (size_t size : edge_sizes(cfg)) {
        const std::string r = make_record(round, seq++, size);
        Result<Position> at;
        switch (seq % 3) {
          case 0:
            at = (*log)->append(r);
            break;
          case 1: {
            // Gather input: three pieces, the middle one crossing fragments.
            const auto b = std::as_bytes(std::span(r.data(), r.size()));
            const size_t a = b.size() / 3, m = b.size() / 2;
            const std::span<const std::byte> pieces[] = {b.first(a), b.subspan(a, m),
                                                         b.subspan(a + m)};
            at = (*log)->append(std::span<const std::span<const std::byte>>(pieces));
            break;
          }
          default:
            at = (*log)->append_async(r);
            break;
        }
        ASSERT_TRUE(at.has_value()) << size << ": " << at.error().describe();
        want.push_back(Replayed{*at, r});
      }
    }
    ASSERT_TRUE((*log)->wait_durable(want.back().position, std::chrono::seconds(10)).has_value());
    EXPECT_TRUE(same_records(read_all(**log), want));
    // Reading from each record's position starts at that record.
    for (size_t i = 0; i < want.size(); i += 5) {
      auto from = read_all(**log, want[i].position);
      ASSERT_FALSE(from.empty());
      EXPECT_EQ(from.front().position, want[i].position);
      EXPECT_EQ(from.size(), want.size() - i);
    }
    ASSERT_TRUE((*log)->close().has_value());
  }
  auto got = replay_all(cfg);
  ASSERT_TRUE(got.has_value()) << got.error().describe();
  EXPECT_TRUE(same_records(*got, want));
  // A second session appends after the first's fragments and replays both.
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    const std::string r = make_record(9, 0, cfg.max_record);
    auto at = (*log)->append(r);
    ASSERT_TRUE(at.has_value()) << at.error().describe();
    want.push_back(Replayed{*at, r});
    ASSERT_TRUE((*log)->close().has_value());
  }
  got = replay_all(cfg);
  ASSERT_TRUE(got.has_value()) << got.error().describe();
  EXPECT_TRUE(same_records(*got, want));
}

TEST(LargeRecord, TailerReturnsEachWholeAsItBecomesDurable) {
  TempDir dir;
  Config cfg = large_config(dir.path());
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  auto tailer = (*log)->tail();
  ASSERT_TRUE(tailer.has_value()) << tailer.error().describe();
  for (uint64_t i = 0; i < 6; ++i) {
    const std::string r = make_record(1, i, i % 2 ? 200 << 10 : 40);
    auto at = (*log)->append(r);
    ASSERT_TRUE(at.has_value()) << at.error().describe();
    ASSERT_TRUE((*log)->sync().has_value());
    auto rec = tailer->next(std::chrono::seconds(10));
    ASSERT_TRUE(rec.has_value()) << rec.error().describe();
    ASSERT_TRUE(rec->has_value()) << "record " << i << " did not arrive";
    EXPECT_EQ((**rec).position, *at);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>((**rec).data.data()), (**rec).data.size()),
              r);
  }
  ASSERT_TRUE((*log)->close().has_value());
}

// A completion reports the position append_async returned (not that of
// the record's last fragment), and fires once the whole record is durable.
TEST(LargeRecord, CompletionsReportTheRecordsOwnPosition) {
  TempDir dir;
  const Config cfg = large_config(dir.path());
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  std::mutex mu;
  std::vector<Position> done;
  std::vector<Position> returned;
  for (uint64_t i = 0; i < 6; ++i) {
    const std::string r = make_record(3, i, i % 2 ? 40 : 150 << 10);
    auto at = (*log)->append_async(r, [&](Result<Position> p) {
      ASSERT_TRUE(p.has_value()) << p.error().describe();
      std::lock_guard lock(mu);
      done.push_back(*p);
    });
    ASSERT_TRUE(at.has_value()) << at.error().describe();
    returned.push_back(*at);
  }
  ASSERT_TRUE((*log)->close().has_value());
  EXPECT_EQ(done, returned);
}

// wait_durable(position) of a record in fragments returns only once its
// last fragment is durable, also when syncs for other writers begin while
// the record is being placed: durable() never stops inside a record.
TEST(LargeRecord, WaitDurableCoversTheWholeRecord) {
  TempDir dir("/dev/shm");  // syncs of microseconds: many begin inside the window
  Config cfg = large_config(dir.path());
  // A sync thread that never rests: some syncs begin while a record's
  // fragments are being placed, when the active segment is already full.
  cfg.mode = SyncMode::periodic;
  cfg.interval = std::chrono::microseconds(500);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  std::atomic<bool> stop{false};
  std::thread small([&] {
    for (uint64_t i = 0; !stop.load(); ++i) {
      auto at = (*log)->append(make_record(4, i, 24));
      if (!at) {
        ADD_FAILURE() << at.error().describe();
        return;
      }
    }
  });
  const int rounds = scaled(300);
  int early = 0;
  for (int i = 0; i < rounds && early == 0; ++i) {
    const std::string r = make_record(5, i, cfg.max_record);
    auto at = (*log)->append_async(r);
    ASSERT_TRUE(at.has_value()) << at.error().describe();
    auto w = (*log)->wait_durable(*at, std::chrono::seconds(10));
    ASSERT_TRUE(w.has_value()) << w.error().describe();
    // The record spans segments past its first: a durable position still
    // in that segment stops inside it (the next sync soon moves past, so
    // this is read at once).
    const Position durable = (*log)->durable();
    if (durable.segment() <= at->segment()) {
      ++early;
      ADD_FAILURE() << "round " << i << ": wait_durable(" << at->to_string()
                    << ") returned with durable() " << durable.to_string() << ", inside the record";
    }
  }
  stop = true;
  small.join();
  ASSERT_TRUE((*log)->close().has_value());
}

TEST(LargeRecord, LimitsAreRefusedWithTheirNames) {
  TempDir dir;
  Config cfg = large_config(dir.path());
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    auto at = (*log)->append(std::string(cfg.max_record + 1, 'x'));
    ASSERT_FALSE(at.has_value());
    EXPECT_EQ(at.error().code, Errc::invalid_argument);
    EXPECT_NE(at.error().message.find("max_record"), std::string::npos) << at.error().message;
    // A batch is one record under one checksum: never fragmented.
    const std::string big(cfg.max_unfragmented_size(), 'b');
    const std::string_view two[] = {big, "x"};
    auto b = (*log)->append_batch(std::span<const std::string_view>(two));
    ASSERT_FALSE(b.has_value());
    EXPECT_EQ(b.error().code, Errc::invalid_argument);
    EXPECT_NE(b.error().message.find("max_unfragmented_size"), std::string::npos)
        << b.error().message;
    ASSERT_TRUE((*log)->close().has_value());
  }
  Config c = cfg;
  c.max_record = (uint64_t{1} << 30) + 1;
  auto bad = c.validate();
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("max_record"), std::string::npos);
  c = cfg;
  c.max_total_size = 4 * kSegment;  // less than the active, five spanned and the spares
  bad = c.validate();
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("max_total_size"), std::string::npos) << bad.error().message;
  auto parsed = Config::parse("max_record=2MiB");
  ASSERT_TRUE(parsed.has_value()) << parsed.error().describe();
  EXPECT_EQ(parsed->max_record, uint64_t{2} << 20);
}

TEST(LargeRecord, ManyWritersMixingSizesReplayInOrder) {
  TempDir dir;
  const Config cfg = large_config(dir.path());
  constexpr uint32_t kThreads = 4;
  const int per = scaled(60);
  std::vector<std::vector<Replayed>> mine(kThreads);
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    std::vector<std::thread> threads;
    for (uint32_t t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(t + 5);
        for (int i = 0; i < per; ++i) {
          const size_t size = rng() % 4 == 0 ? 16 + rng() % cfg.max_record : 16 + rng() % 300;
          const std::string r = make_record(t, i, size);
          auto at = (*log)->append(r);
          if (!at) {
            ADD_FAILURE() << at.error().describe();
            return;
          }
          mine[t].push_back(Replayed{*at, r});
        }
      });
    }
    for (auto& th : threads) th.join();
    ASSERT_TRUE((*log)->close().has_value());
  }
  std::vector<Replayed> want;
  for (const auto& m : mine) want.insert(want.end(), m.begin(), m.end());
  std::sort(want.begin(), want.end(),
            [](const Replayed& a, const Replayed& b) { return a.position < b.position; });
  auto got = replay_all(cfg);
  ASSERT_TRUE(got.has_value()) << got.error().describe();
  EXPECT_TRUE(same_records(*got, want));
}

TEST(LargeRecord, ReleaseTakesARecordWithItsFirstFragment) {
  TempDir dir;
  const Config cfg = large_config(dir.path());
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  std::vector<Replayed> want;
  for (uint64_t i = 0; i < 8; ++i) {
    const std::string r = make_record(2, i, i % 2 ? 150 << 10 : 100);
    auto at = (*log)->append(r);
    ASSERT_TRUE(at.has_value()) << at.error().describe();
    want.push_back(Replayed{*at, r});
  }
  // Release before a position inside the third large record's last
  // segment: its first fragment's segment goes, so it is not replayed, and
  // neither are its later fragments that stay.
  const Position cut(want[5].position.segment() + 2, seg::kHeaderSize);
  auto freed = (*log)->release_before(cut);
  ASSERT_TRUE(freed.has_value()) << freed.error().describe();
  ASSERT_FALSE(freed->ids.empty());
  std::vector<Replayed> rest;
  for (const auto& r : want) {
    if (r.position.segment() >= cut.segment()) rest.push_back(r);
  }
  EXPECT_TRUE(same_records(read_all(**log), rest));
  // oldest() names the first record read() returns, a fragmented one too.
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(freed->oldest, rest.front().position);
  ASSERT_TRUE((*log)->close().has_value());
  auto got = replay_all(cfg);
  ASSERT_TRUE(got.has_value()) << got.error().describe();
  EXPECT_TRUE(same_records(*got, rest));
}

TEST(LargeRecord, OldestIsAFragmentedFirstRecord) {
  TempDir dir;
  const Config cfg = large_config(dir.path());
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  auto at = (*log)->append(make_record(6, 0, 200 << 10));
  ASSERT_TRUE(at.has_value()) << at.error().describe();
  ASSERT_TRUE((*log)->append(make_record(6, 1, 50)).has_value());
  auto oldest = (*log)->oldest();
  ASSERT_TRUE(oldest.has_value()) << oldest.error().describe();
  EXPECT_EQ(*oldest, *at);
  ASSERT_TRUE((*log)->close().has_value());
}

// ---- Crash states (crash_sim.h) of a run with large records ----

TEST(LargeRecord, CrashStatesKeepEveryAcknowledgedLargeRecord) {
  if (kSanitized && backend_under_test() == "uring")
    GTEST_SKIP() << "aio covers the direct-segment image under ASan";
  using namespace crash;
  TempDir dir;
  Config cfg = large_config(dir.path());
  cfg.max_record = 160 << 10;
  Recorder recorder(dir.path(), direct_writes_durable_at_completion(cfg));
  {
    HookGuard guard(&recorder);
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    std::vector<std::thread> threads;
    for (uint32_t t = 0; t < 2; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(t + 21);
        for (uint64_t i = 0; i < 40; ++i) {
          const size_t size = rng() % 3 == 0 ? 16 + rng() % cfg.max_record : 16 + rng() % 900;
          const std::string r = make_record(t, i, size);
          auto at = (*log)->append(r);
          if (!at) {
            ADD_FAILURE() << at.error().describe();
            return;
          }
          recorder.ack(*at, r);
        }
      });
    }
    for (auto& th : threads) th.join();
    ASSERT_TRUE((*log)->close().has_value());
  }
  const Recording rec = recorder.take();
  const int states = kSanitized ? 60 : 400;
  const Sampled sampled = sample_states(rec, cfg, states, 0x1a26e7ec);
  for (const std::string& f : sampled.failures) ADD_FAILURE() << f;
  // Not vacuous: crashes landed mid-run, with acknowledged records to keep.
  EXPECT_GT(sampled.short_of_all, states / 4);
  EXPECT_GT(sampled.required, 0u);
}

}  // namespace
}  // namespace synclog::test
