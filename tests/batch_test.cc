// Gather appends and write batches through the public API, on every backend:
// what they return is what readers, tailers, recovery and the space calls
// see, and the limits are errors that name the problem.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace synclog::test {
namespace {

std::span<const std::byte> bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

struct Appended {
  std::vector<Position> positions;
  std::vector<std::string> data;
  std::vector<bool> in_batch;  // past a batch's first record
};

Result<std::vector<Position>> append_batch(Log& log, const std::vector<std::string>& records) {
  std::vector<std::span<const std::byte>> spans;
  for (const auto& r : records) spans.push_back(bytes(r));
  return log.append_batch(spans);
}

// Batches of 1..8 records of 1..3000 bytes, with single appends between
// them, until the log reaches segment `until`.
void fill(Log& log, uint64_t until, uint32_t thread, Appended* out) {
  std::mt19937_64 rng(thread + 1);
  uint64_t seq = 0;
  while (out->positions.empty() || out->positions.back().segment() < until) {
    if (rng() % 3 == 0) {
      const std::string r = make_record(thread, seq++, 1 + rng() % 3000);
      auto pos = log.append(r);
      ASSERT_TRUE(pos.has_value()) << pos.error().describe();
      out->positions.push_back(*pos);
      out->data.push_back(r);
      out->in_batch.push_back(false);
      continue;
    }
    std::vector<std::string> batch;
    const size_t n = 1 + rng() % 8;
    for (size_t i = 0; i < n; ++i) batch.push_back(make_record(thread, seq++, 1 + rng() % 3000));
    auto pos = append_batch(log, batch);
    ASSERT_TRUE(pos.has_value()) << pos.error().describe();
    ASSERT_EQ(pos->size(), n);
    for (size_t i = 0; i < n; ++i) {
      if (i > 0) {
        ASSERT_GT((*pos)[i], (*pos)[i - 1]);
        ASSERT_EQ((*pos)[i].segment(), (*pos)[0].segment()) << "a batch split across segments";
      }
      out->positions.push_back((*pos)[i]);
      out->data.push_back(batch[i]);
      out->in_batch.push_back(i > 0);
    }
  }
}

void expect_replay(const std::vector<Replayed>& got, const Appended& want) {
  ASSERT_EQ(got.size(), want.data.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].position, want.positions[i]) << "record " << i;
    ASSERT_EQ(got[i].data, want.data[i]) << "record " << i;
  }
}

TEST(Batch, RoundTripAcrossSegmentsAndReopen) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  Appended a;
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    ASSERT_NO_FATAL_FAILURE(fill(**log, 3, 0, &a));
    ASSERT_NO_FATAL_FAILURE(expect_replay(read_all(**log), a));
    ASSERT_TRUE((*log)->close().has_value());
  }
  RecoveryReport rep;
  auto replayed = replay_all(cfg, &rep);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  ASSERT_NO_FATAL_FAILURE(expect_replay(*replayed, a));
  EXPECT_EQ(rep.records, a.data.size()) << "recovery counts a batch's records";
  EXPECT_FALSE(rep.torn_tail);
  EXPECT_TRUE(rep.damage.empty());
}

// A batch torn anywhere replays none of its records: the log is cut (the
// rest of the segment zeroed, as a write that never reached the disk) at
// every 8-byte step inside the last batch, and recovery ends the log at the
// batch, keeping every record before it.
TEST(Batch, ATornBatchReplaysNoneOfItsRecords) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.mode = SyncMode::periodic;  // no sync between the records and the batch
  std::vector<std::string> before;
  std::vector<Position> batch;
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    for (int i = 0; i < 5; ++i) {
      before.push_back(make_record(1, i, 40));
      ASSERT_TRUE((*log)->append(before.back()).has_value());
    }
    ASSERT_TRUE((*log)->sync().has_value());
    const std::vector<std::string> recs = {make_record(2, 0, 30), make_record(2, 1, 9),
                                           make_record(2, 2, 100)};
    std::vector<std::string_view> views(recs.begin(), recs.end());
    auto at = (*log)->append_batch(views);
    ASSERT_TRUE(at.has_value()) << at.error().describe();
    batch = *at;
    ASSERT_TRUE((*log)->close().has_value());
  }
  const Files whole = load_segments(dir.path());
  const uint64_t id = batch.front().segment();
  const uint64_t header = batch.front().offset() - 16;   // batch record header, count, reserved
  const uint64_t end = batch.back().offset() + 8 + 104;  // the last entry, padded
  int cuts = 0;
  for (uint64_t cut = header; cut < end; cut += 8) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    Files torn = whole;
    auto& bytes = torn.at(id);
    std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(cut), bytes.end(), '\0');
    TempDir copy;
    write_segments(copy.path(), torn);
    Config c = cfg;
    c.dir = copy.path();
    RecoveryReport rep;
    auto got = replay_all(c, &rep);
    ASSERT_TRUE(got.has_value()) << got.error().describe();
    ASSERT_EQ(got->size(), before.size()) << "a torn batch replayed some of its records";
    for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ((*got)[i].data, before[i]);
    EXPECT_TRUE(rep.damage.empty());
    ++cuts;
  }
  EXPECT_GT(cuts, 20);
}

TEST(Batch, GatherAppendIsOneRecordOfItsPieces) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  Appended a;
  for (int i = 0; i < 200; ++i) {
    const std::string whole = make_record(1, static_cast<uint64_t>(i), 1 + (i * 37) % 5000);
    std::vector<std::span<const std::byte>> pieces;
    // Cut at a few places, empty pieces included.
    for (size_t at = 0, k = 0; at <= whole.size(); ++k) {
      const size_t len = std::min(whole.size() - at, (k * 7 + i) % 900);
      pieces.push_back(bytes(whole).subspan(at, len));
      at += len;
      if (at == whole.size()) break;
    }
    auto pos = (*log)->append(std::span<const std::span<const std::byte>>(pieces));
    ASSERT_TRUE(pos.has_value()) << pos.error().describe();
    a.positions.push_back(*pos);
    a.data.push_back(whole);
  }
  ASSERT_NO_FATAL_FAILURE(expect_replay(read_all(**log), a));

  // Pieces that add up to nothing make an empty record (format version 4).
  const std::span<const std::byte> none[] = {{}, {}};
  auto empty = (*log)->append(std::span<const std::span<const std::byte>>(none));
  ASSERT_TRUE(empty.has_value()) << empty.error().describe();
  a.positions.push_back(*empty);
  a.data.emplace_back();
  ASSERT_NO_FATAL_FAILURE(expect_replay(read_all(**log), a));
  const std::string half(cfg.max_record_size() / 2 + 1, 'h');
  const std::span<const std::byte> big[] = {bytes(half), bytes(half)};
  auto large = (*log)->append(std::span<const std::span<const std::byte>>(big));
  ASSERT_FALSE(large.has_value());
  EXPECT_NE(large.error().message.find(std::to_string(cfg.max_record_size())), std::string::npos)
      << large.error().message;
  ASSERT_TRUE((*log)->close().has_value());
}

TEST(Batch, ReadFromAnInnerPositionStartsThere) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  Appended a;
  ASSERT_NO_FATAL_FAILURE(fill(**log, 2, 2, &a));
  for (size_t i = 0; i < a.positions.size(); i += 3) {
    auto reader = (*log)->read(a.positions[i]);
    ASSERT_TRUE(reader.has_value());
    auto rec = reader->next();
    ASSERT_TRUE(rec.has_value()) << rec.error().describe();
    ASSERT_TRUE(rec->has_value());
    ASSERT_EQ((*rec)->position, a.positions[i]) << "record " << i;
    ASSERT_EQ(std::string(reinterpret_cast<const char*>((*rec)->data.data()), (*rec)->data.size()),
              a.data[i]);
    if (i + 1 < a.positions.size()) {
      // One byte on: the next record (found by walking the segment).
      const Position p = a.positions[i];
      auto after = (*log)->read(Position(p.segment(), p.offset() + 1));
      ASSERT_TRUE(after.has_value());
      auto next = after->next();
      ASSERT_TRUE(next.has_value() && next->has_value());
      ASSERT_EQ((*next)->position, a.positions[i + 1]);
    }
  }
  ASSERT_TRUE((*log)->close().has_value());
}

TEST(Batch, TailerSegmentsOldestAndReleaseSeeInnerRecords) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.recycle = false;
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  auto tailer = (*log)->tail();
  ASSERT_TRUE(tailer.has_value());
  Appended a;
  // The log's first record is a batch's.
  auto first = append_batch(**log, {"b0", "b1", "b2"});
  ASSERT_TRUE(first.has_value()) << first.error().describe();
  for (int i = 0; i < 3; ++i) {
    a.positions.push_back((*first)[i]);
    a.data.push_back("b" + std::to_string(i));
    a.in_batch.push_back(i > 0);
  }
  auto oldest = (*log)->oldest();
  ASSERT_TRUE(oldest.has_value() && oldest->has_value());
  EXPECT_EQ(**oldest, a.positions[0]);
  ASSERT_NO_FATAL_FAILURE(fill(**log, 4, 3, &a));

  for (size_t i = 0; i < a.positions.size(); ++i) {
    auto rec = tailer->next(std::chrono::seconds(5));
    ASSERT_TRUE(rec.has_value()) << rec.error().describe();
    ASSERT_TRUE(rec->has_value()) << "tailer stopped at record " << i;
    ASSERT_EQ((*rec)->position, a.positions[i]) << "record " << i;
  }

  auto segs = (*log)->segments();
  ASSERT_TRUE(segs.has_value()) << segs.error().describe();
  for (const SegmentInfo& s : *segs) {
    if (!s.first) continue;
    std::vector<Position> in;
    for (Position p : a.positions) {
      if (p.segment() == s.id) in.push_back(p);
    }
    ASSERT_FALSE(in.empty());
    EXPECT_EQ(*s.first, in.front()) << "segment " << s.id;
    EXPECT_EQ(*s.last, in.back()) << "segment " << s.id;
  }

  // Release up to a record inside a batch in segment 3.
  size_t k = 0;
  while (a.positions[k].segment() < 3 || !a.in_batch[k]) ++k;
  ASSERT_EQ(a.positions[k].segment(), 3u);
  auto released = (*log)->release_before(a.positions[k]);
  ASSERT_TRUE(released.has_value()) << released.error().describe();
  EXPECT_EQ(released->ids, (std::vector<uint64_t>{1, 2}));
  ASSERT_TRUE(released->oldest.has_value());
  size_t first3 = 0;
  while (a.positions[first3].segment() < 3) ++first3;
  EXPECT_EQ(*released->oldest, a.positions[first3]);
  ASSERT_TRUE((*log)->close().has_value());
}

TEST(Batch, LimitsAreErrorsThatNameTheProblem) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  auto empty = (*log)->append_batch(std::span<const std::span<const std::byte>>());
  ASSERT_FALSE(empty.has_value());
  EXPECT_EQ(empty.error().code, Errc::invalid_argument);
  EXPECT_NE(empty.error().message.find("empty batch"), std::string::npos);

  // An empty record inside a batch is a record of its own (format version 4).
  auto hole = append_batch(**log, {"a", "", "c"});
  ASSERT_TRUE(hole.has_value()) << hole.error().describe();
  ASSERT_EQ(hole->size(), 3u);
  EXPECT_EQ((*hole)[1].offset(), (*hole)[0].offset() + 16);
  EXPECT_EQ((*hole)[2].offset(), (*hole)[1].offset() + 8);

  const uint64_t max = cfg.max_record_size();
  // Data alone over the limit.
  auto large = append_batch(**log, {std::string(max / 2, 'x'), std::string(max / 2 + 1, 'y')});
  ASSERT_FALSE(large.has_value());
  EXPECT_NE(large.error().message.find("maximum of " + std::to_string(max)), std::string::npos)
      << large.error().message;
  // Data within it, the encoding over it: 8 + 8 per record.
  const size_t fits = (max - 8 - 8) / 8 * 8;
  auto framing = append_batch(**log, {std::string(fits - 8, 'z'), std::string(1, 'w')});
  ASSERT_FALSE(framing.has_value());
  EXPECT_NE(framing.error().message.find("encoded"), std::string::npos) << framing.error().message;
  // The largest one-record batch fits.
  auto exact = append_batch(**log, {std::string(fits, 'q')});
  ASSERT_TRUE(exact.has_value()) << exact.error().describe();
  auto all = read_all(**log);
  ASSERT_EQ(all.size(), 4u) << "a refused batch left records behind";
  EXPECT_EQ(all[0].data, "a");
  EXPECT_EQ(all[1].position, (*hole)[1]);
  EXPECT_TRUE(all[1].data.empty());
  EXPECT_EQ(all[2].data, "c");
  EXPECT_EQ(all[3].data.size(), fits);
  ASSERT_TRUE((*log)->close().has_value());
}

TEST(Batch, ConcurrentBatchesStayContiguous) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  constexpr int kThreads = 4;
  const int batches = scaled(60);
  std::vector<std::vector<std::vector<Position>>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int b = 0; b < batches; ++b) {
        std::vector<std::string> recs;
        for (int i = 0; i < 1 + (b + t) % 6; ++i) {
          recs.push_back(make_record(static_cast<uint32_t>(t), static_cast<uint64_t>(b * 10 + i),
                                     20 + (b * 31 + i * 7) % 700));
        }
        auto pos = append_batch(**log, recs);
        ASSERT_TRUE(pos.has_value()) << pos.error().describe();
        got[t].push_back(*pos);
      }
    });
  }
  for (auto& th : threads) th.join();
  auto all = read_all(**log);
  size_t total = 0;
  for (const auto& per : got) {
    for (const auto& batch : per) total += batch.size();
  }
  ASSERT_EQ(all.size(), total);
  for (int t = 0; t < kThreads; ++t) {
    for (const auto& batch : got[t]) {
      auto it = std::find_if(all.begin(), all.end(),
                             [&](const Replayed& r) { return r.position == batch[0]; });
      ASSERT_NE(it, all.end());
      for (size_t i = 0; i < batch.size(); ++i, ++it) {
        ASSERT_NE(it, all.end());
        ASSERT_EQ(it->position, batch[i]) << "another record inside a batch";
        uint32_t th = 0;
        uint64_t seq = 0;
        ASSERT_TRUE(check_record(it->data, &th, &seq));
        EXPECT_EQ(th, static_cast<uint32_t>(t));
      }
    }
  }
  ASSERT_TRUE((*log)->close().has_value());
}

}  // namespace
}  // namespace synclog::test
