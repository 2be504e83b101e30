// Empty records (0-byte payloads, format version 4) through every append
// call, on every backend: they come back from readers, tailers and
// recovery at the positions the appends returned, in order, and a torn
// tail or a crash never invents one nor drops a durable one. An empty
// record's frame is its 8-byte header alone, so it is the case where a
// reader could most easily take a record for an unwritten slot.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
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

std::span<const std::byte> bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

using Written = std::vector<Replayed>;

void add(Written* w, Position at, const std::string& data) { w->push_back(Replayed{at, data}); }

Result<std::vector<Position>> batch(Log& log, const std::vector<std::string>& records,
                                    bool async = false) {
  std::vector<std::span<const std::byte>> spans;
  for (const auto& r : records) spans.push_back(bytes(r));
  return async ? log.append_batch_async(spans) : log.append_batch(spans);
}

void add_batch(Log& log, const std::vector<std::string>& records, Written* w, bool async = false) {
  auto at = batch(log, records, async);
  ASSERT_TRUE(at.has_value()) << at.error().describe();
  ASSERT_EQ(at->size(), records.size());
  for (size_t i = 0; i < records.size(); ++i) add(w, (*at)[i], records[i]);
}

// One empty record by every append call, between non-empty ones.
void append_by_every_api(Log& log, Written* w) {
  const std::string none, a = "a", b(100, 'b');
  auto p = log.append(none);
  ASSERT_TRUE(p.has_value()) << p.error().describe();
  add(w, *p, none);
  p = log.append(a);
  ASSERT_TRUE(p.has_value()) << p.error().describe();
  add(w, *p, a);
  p = log.append(std::span<const std::byte>());
  ASSERT_TRUE(p.has_value()) << p.error().describe();
  add(w, *p, none);
  const std::span<const std::byte> empty_pieces[] = {{}, bytes(none), {}};
  p = log.append(std::span<const std::span<const std::byte>>(empty_pieces));
  ASSERT_TRUE(p.has_value()) << p.error().describe();
  add(w, *p, none);
  p = log.append(std::span<const std::span<const std::byte>>());  // no pieces at all
  ASSERT_TRUE(p.has_value()) << p.error().describe();
  add(w, *p, none);

  std::mutex mu;
  std::vector<Result<Position>> done;
  auto cb = [&](Result<Position> r) {
    std::lock_guard lock(mu);
    done.push_back(r);
  };
  auto q = log.append_async(none, cb);
  ASSERT_TRUE(q.has_value()) << q.error().describe();
  add(w, *q, none);
  auto q2 = log.append_async(b, cb);
  ASSERT_TRUE(q2.has_value()) << q2.error().describe();
  add(w, *q2, b);
  auto q3 = log.append_async(none, cb);
  ASSERT_TRUE(q3.has_value()) << q3.error().describe();
  add(w, *q3, none);
  ASSERT_TRUE(log.wait_durable(*q3, std::chrono::seconds(10)).has_value());

  ASSERT_NO_FATAL_FAILURE(add_batch(log, {"x", none, "yy", none, none, "z"}, w));
  ASSERT_NO_FATAL_FAILURE(add_batch(log, {none}, w));
  ASSERT_NO_FATAL_FAILURE(add_batch(log, {none, none, none}, w));
  ASSERT_NO_FATAL_FAILURE(add_batch(log, {none, "tail"}, w, /*async=*/true));
  ASSERT_NO_FATAL_FAILURE(add_batch(log, {none, none}, w, /*async=*/true));
  p = log.append(none);
  ASSERT_TRUE(p.has_value()) << p.error().describe();
  add(w, *p, none);
  ASSERT_TRUE(log.sync().has_value());

  // Completions came once each, with the positions returned, in order.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    {
      std::lock_guard lock(mu);
      if (done.size() >= 3) break;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "async completions missing";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::lock_guard lock(mu);
  ASSERT_EQ(done.size(), 3u);
  for (const auto& r : done) ASSERT_TRUE(r.has_value()) << r.error().describe();
  EXPECT_EQ(*done[0], *q);
  EXPECT_EQ(*done[1], *q2);
  EXPECT_EQ(*done[2], *q3);
}

TEST(EmptyRecord, EveryApiReplaysAtItsPositionAcrossReopen) {
  TempDir dir;
  const Config cfg = small_config(dir.path());
  Written w;
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    ASSERT_NO_FATAL_FAILURE(append_by_every_api(**log, &w));
    for (size_t i = 1; i < w.size(); ++i) {
      ASSERT_LT(w[i - 1].position, w[i].position) << "positions not ascending at " << i;
    }
    EXPECT_TRUE(same_records(read_all(**log), w)) << "reader of the open log";
    // The oldest record is an empty one.
    auto oldest = (*log)->oldest();
    ASSERT_TRUE(oldest.has_value()) << oldest.error().describe();
    ASSERT_TRUE(oldest->has_value());
    EXPECT_EQ(**oldest, w[0].position);
    // A reader from each record's position starts exactly there, an empty
    // record and an empty record inside a batch included.
    for (size_t i = 0; i < w.size(); ++i) {
      const auto from = read_all(**log, w[i].position);
      EXPECT_TRUE(same_records(from, Written(w.begin() + static_cast<ptrdiff_t>(i), w.end())))
          << "read from " << w[i].position.to_string();
    }
    // A tailer sees the same records, then nothing: no empty record is
    // taken for the end, and the end is not taken for an empty record.
    auto tailer = (*log)->tail();
    ASSERT_TRUE(tailer.has_value()) << tailer.error().describe();
    std::vector<Replayed> tailed;
    for (;;) {
      auto r = tailer->next(std::chrono::milliseconds(50));
      ASSERT_TRUE(r.has_value()) << r.error().describe();
      if (!*r) break;
      tailed.push_back(Replayed{
          (*r)->position,
          std::string(reinterpret_cast<const char*>((*r)->data.data()), (*r)->data.size())});
    }
    EXPECT_TRUE(same_records(tailed, w)) << "tailer";
    ASSERT_TRUE((*log)->close().has_value());
  }
  RecoveryReport rep;
  auto again = replay_all(cfg, &rep);
  ASSERT_TRUE(again.has_value()) << again.error().describe();
  EXPECT_TRUE(rep.damage.empty()) << rep.damage[0].reason;
  EXPECT_FALSE(rep.torn_tail);
  EXPECT_EQ(rep.records, w.size());
  EXPECT_TRUE(same_records(*again, w)) << "after reopen";
}

TEST(EmptyRecord, AnEmptyBatchIsStillRefused) {
  TempDir dir;
  auto log = Log::open(small_config(dir.path()));
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  auto none = (*log)->append_batch(std::span<const std::span<const std::byte>>());
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code, Errc::invalid_argument);
  auto none_async = (*log)->append_batch_async(std::span<const std::string_view>());
  ASSERT_FALSE(none_async.has_value());
  EXPECT_EQ(none_async.error().code, Errc::invalid_argument);
  ASSERT_TRUE((*log)->close().has_value());
}

// Many empty records, alone and in batches, across several segments (an
// empty record right before an end record, or first in a segment), then a
// second session.
TEST(EmptyRecord, ManyAcrossSegmentsAndSessions) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.mode = SyncMode::periodic;
  Written w;
  std::mt19937_64 rng(7);
  for (int session = 0; session < 2; ++session) {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    const uint64_t until = (w.empty() ? 0 : w.back().position.segment()) + 3;
    uint64_t seq = 0;
    while (w.empty() || w.back().position.segment() < until) {
      const auto size = [&] {
        return rng() % 2 == 0
                   ? std::string()
                   : make_record(static_cast<uint32_t>(session), seq++, 16 + rng() % 900);
      };
      if (rng() % 4 == 0) {
        std::vector<std::string> b(1 + rng() % 5);
        for (auto& r : b) r = size();
        ASSERT_NO_FATAL_FAILURE(add_batch(**log, b, &w));
      } else {
        const std::string r = size();
        auto p = (*log)->append(r);
        ASSERT_TRUE(p.has_value()) << p.error().describe();
        add(&w, *p, r);
      }
    }
    ASSERT_TRUE((*log)->close().has_value());
  }
  RecoveryReport rep;
  auto again = replay_all(cfg, &rep);
  ASSERT_TRUE(again.has_value()) << again.error().describe();
  EXPECT_TRUE(rep.damage.empty()) << rep.damage[0].reason;
  EXPECT_EQ(rep.records, w.size());
  EXPECT_TRUE(same_records(*again, w));
  EXPECT_GT(std::count_if(w.begin(), w.end(), [](const Replayed& r) { return r.data.empty(); }),
            100);
}

// ---- Torn tails: cut the unsynced end at every byte ----

struct Frame {
  uint32_t start, end, nonzero_end;
};

struct Built {
  Files files;
  Written records;
  Position durable;
  std::vector<Frame> frames;  // records of the last segment, end record included
};

// A log whose one segment ends in an unsynced section of empty records,
// alone and in batches, between short ones.
void build(const fs::path& dir, Built* out) {
  fs::create_directories(dir);
  Config cfg = small_config(dir);
  cfg.mode = SyncMode::periodic;
  cfg.interval = std::chrono::seconds(10);  // only explicit sync() calls make sync sections
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  const std::string none;
  auto one = [&](const std::string& r) {
    auto p = (*log)->append(r);
    ASSERT_TRUE(p.has_value()) << p.error().describe();
    add(&out->records, *p, r);
  };
  ASSERT_NO_FATAL_FAILURE(one("durable"));
  ASSERT_NO_FATAL_FAILURE(one(none));
  ASSERT_NO_FATAL_FAILURE(add_batch(**log, {none, "d"}, &out->records));
  ASSERT_TRUE((*log)->sync().has_value());
  out->durable = (*log)->durable();
  ASSERT_NO_FATAL_FAILURE(one(none));
  ASSERT_NO_FATAL_FAILURE(one(none));
  ASSERT_NO_FATAL_FAILURE(one("a"));
  ASSERT_NO_FATAL_FAILURE(one(none));
  ASSERT_NO_FATAL_FAILURE(add_batch(**log, {none, "x", none}, &out->records));
  ASSERT_NO_FATAL_FAILURE(add_batch(**log, {none, none}, &out->records));
  ASSERT_NO_FATAL_FAILURE(one("12345678"));
  ASSERT_NO_FATAL_FAILURE(one(none));
  ASSERT_TRUE((*log)->close().has_value());
  out->files = load_segments(dir);
  ASSERT_EQ(out->files.size(), 1u);
  const std::string& file = out->files.begin()->second;
  const auto image = bytes(file);
  for (uint32_t off = seg::kHeaderSize;;) {
    const seg::Decoded d = seg::decode_record(image, 1, off);
    ASSERT_EQ(d.status, seg::Decode::ok) << "at " << off << ": " << d.reason;
    uint32_t nz = off + d.record.framed;
    while (nz > off && file[nz - 1] == '\0') --nz;
    out->frames.push_back(Frame{off, off + d.record.framed, nz});
    off += d.record.framed;
    if (d.record.kind == seg::Kind::end) break;
  }
}

// The records that must replay after a cut at c: those whose frame (their
// batch's, inside a batch) is untouched by it.
Written survivors(const Built& log, uint32_t c, bool zeroed) {
  uint32_t intact_end = seg::kHeaderSize;
  for (const Frame& f : log.frames) {
    if ((zeroed ? f.nonzero_end : f.end) > c) break;
    intact_end = f.end;
  }
  Written want;
  for (const Replayed& r : log.records) {
    if (r.position.offset() < intact_end) want.push_back(r);
  }
  return want;
}

void cut_and_check(const Built& log, const fs::path& work, uint32_t c, bool zeroed) {
  SCOPED_TRACE(std::string(zeroed ? "zeroed" : "truncated") + " from byte " + std::to_string(c));
  Files files = log.files;
  std::string& last = files.begin()->second;
  if (zeroed) {
    std::fill(last.begin() + c, last.end(), '\0');
  } else {
    last.resize(c);
  }
  write_segments(work, files);
  Config cfg = small_config(work);
  cfg.mode = SyncMode::periodic;
  RecoveryReport rep;
  auto got = replay_all(cfg, &rep);
  ASSERT_TRUE(got.has_value()) << got.error().describe();
  EXPECT_TRUE(rep.damage.empty()) << "a torn tail is not damage: " << rep.damage[0].reason;
  const Written want = survivors(log, c, zeroed);
  EXPECT_TRUE(same_records(*got, want));
  size_t durable = 0;
  for (const Replayed& r : log.records) durable += r.position < log.durable;
  EXPECT_GE(got->size(), durable) << "a durable record was dropped";
}

TEST(EmptyRecord, TornTailNeitherInventsNorDrops) {
  if (kSanitized && !kThreadSanitized && backend_under_test() == "uring")
    GTEST_SKIP() << "aio covers the direct-segment image under ASan";
  // Each cut is recovered on one thread: TSan has races to look for in the
  // writing, which one backend's run takes, not in more cuts.
  if (kThreadSanitized && backend_under_test() != "msync-pool")
    GTEST_SKIP() << "TSan runs this sweep on msync-pool only";
  TempDir dir;
  Built log;
  ASSERT_NO_FATAL_FAILURE(build(dir.path() / "original", &log));
  const fs::path work = dir.path() / "work";
  const uint32_t full_end = log.frames.back().end;
  for (uint32_t c = static_cast<uint32_t>(log.durable.offset()); c <= full_end; ++c) {
    // Sanitizer builds: every byte of each 8-byte header, a few of the rest.
    if (kSanitized && c % 8 != 0 && c % 8 != 7 && c % 24 != 3) continue;
    for (bool zeroed : {false, true}) {
      ASSERT_NO_FATAL_FAILURE(cut_and_check(log, work, c, zeroed));
      if (HasFailure()) return;
    }
  }
}

// ---- Crash states (crash_sim.h) of a run full of empty records ----

TEST(EmptyRecord, CrashStatesKeepEveryAcknowledgedEmptyRecord) {
  if (kSanitized && backend_under_test() == "uring")
    GTEST_SKIP() << "aio covers the direct-segment image under ASan";
  using namespace crash;
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.segment_size = 64 << 10;  // several segment switches in a short run
  Recorder recorder(dir.path(), direct_writes_durable_at_completion(cfg));
  {
    HookGuard guard(&recorder);
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    std::vector<std::thread> threads;
    for (uint32_t t = 0; t < 2; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(t + 11);
        for (uint64_t i = 0; i < 250; ++i) {
          auto pick = [&] {
            return rng() % 2 ? std::string() : make_record(t, i, 16 + rng() % 600);
          };
          if (rng() % 3 == 0) {
            std::vector<std::string> b(1 + rng() % 4);
            for (auto& r : b) r = pick();
            auto at = batch(**log, b);
            if (!at) {
              ADD_FAILURE() << at.error().describe();
              return;
            }
            recorder.ack_batch(*at, b);
          } else {
            const std::string r = pick();
            auto at = (*log)->append(r);
            if (!at) {
              ADD_FAILURE() << at.error().describe();
              return;
            }
            recorder.ack(*at, r);
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    ASSERT_TRUE((*log)->close().has_value());
  }
  const Recording rec = recorder.take();
  const int states = kSanitized ? 60 : 400;
  const Sampled sampled = sample_states(rec, cfg, states, 0xe3b7c0de);
  for (const std::string& f : sampled.failures) ADD_FAILURE() << f;
  // Not vacuous: crashes landed mid-run, with acknowledged records to keep.
  EXPECT_GT(sampled.short_of_all, states / 4);
  EXPECT_GT(sampled.required, 0u);
}

}  // namespace
}  // namespace synclog::test
