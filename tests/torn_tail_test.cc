// Torn tail: a crash can leave the last, unfinished sync section cut off at
// any byte. For every byte offset c of that section we cut the last segment
// there (truncate the file, or zero everything from c on) and check that
// recovery returns exactly the records that lie wholly before the cut,
// byte-identical and at their positions, and that the log then continues
// correctly: new records appended after the torn tail replay after the old
// prefix.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "segments/format.h"
#include "segments/segment.h"
#include "test_util.h"

namespace synclog::test {
namespace {

namespace fs = std::filesystem;

struct Written {
  Position position;
  std::string data;
};

// One record (any kind) as found in a segment file.
struct Framed {
  seg::Kind kind;
  uint32_t start;
  uint32_t end;          // start + framed size
  uint32_t nonzero_end;  // 1 + the offset of its last non-zero byte
};

Config periodic_config(const fs::path& dir) {
  Config c = small_config(dir);
  c.mode = SyncMode::periodic;
  c.interval = std::chrono::seconds(10);  // only explicit sync() calls make sync sections
  return c;
}

std::span<const std::byte> as_bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

// Every record of a segment, in order, up to and including its end record.
std::vector<Framed> parse_segment(const std::string& file, uint64_t id) {
  std::vector<Framed> out;
  for (uint32_t off = seg::kHeaderSize;;) {
    seg::Decoded d = seg::decode_record(as_bytes(file), id, off);
    if (d.status != seg::Decode::ok) break;
    uint32_t nz = off + d.record.framed;
    while (nz > off && file[nz - 1] == '\0') --nz;
    out.push_back(Framed{d.record.kind, off, off + d.record.framed, nz});
    off += d.record.framed;
    if (d.record.kind == seg::Kind::end) break;
  }
  return out;
}

// Bytes from `from` to the last non-zero byte of `file` (0 if none).
uint64_t nonzero_after(const std::string& file, uint64_t from) {
  uint64_t last = file.size();
  while (last > from && file[last - 1] == '\0') --last;
  return last > from ? last - from : 0;
}

// A closed log whose last segment ends with an unfinished sync section.
struct Built {
  Files files;
  std::vector<Written> records;  // every data record, in append order
  Position durable;              // T: durable() after the last explicit sync()
  uint64_t last = 0;             // id of the last segment (holds T and the final section)
  std::vector<Framed> last_records;
  uint32_t full_end = 0;  // end of the last segment's end record: its non-zero bytes end here
};

// The final, unsynced batch: sizes 1..300 with every padding length.
constexpr size_t kFinalSizes[] = {1,  2,  3,  5,  7,  8,  9,   12,  15,  16,
                                  17, 24, 31, 33, 48, 64, 100, 127, 200, 300};

void build(const fs::path& dir, bool roll_over, Built* out) {
  fs::create_directories(dir);
  Config cfg = periodic_config(dir);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  uint64_t seq = 0;
  auto append = [&](uint32_t batch, size_t size) {
    Written w{Position{}, make_record(batch, seq++, size)};
    auto pos = (*log)->append(w.data);
    ASSERT_TRUE(pos.has_value()) << pos.error().describe();
    w.position = *pos;
    out->records.push_back(std::move(w));
  };
  uint32_t batch = 0;
  if (roll_over) {
    // Large batches until a sync section lies in a later segment...
    while ((*log)->durable().segment() < 2) {
      for (int i = 0; i < 12; ++i) ASSERT_NO_FATAL_FAILURE(append(batch, 3000 + 397 * i));
      ASSERT_TRUE((*log)->sync().has_value());
      ++batch;
    }
  }
  // ...then a few small synced batches.
  for (int b = 0; b < 4; ++b, ++batch) {
    for (int i = 0; i < 10; ++i)
      ASSERT_NO_FATAL_FAILURE(append(batch, 16 + (b * 10 + i) * 37 % 480));
    ASSERT_TRUE((*log)->sync().has_value());
  }
  out->durable = (*log)->durable();
  const size_t first_final = out->records.size();
  for (size_t size : kFinalSizes) ASSERT_NO_FATAL_FAILURE(append(batch, size));
  ASSERT_TRUE((*log)->close().has_value());

  out->files = load_segments(dir);
  ASSERT_FALSE(out->files.empty());
  out->last = out->files.rbegin()->first;
  if (roll_over) {
    ASSERT_GE(out->last, 2u) << "the log did not roll over";
  } else {
    ASSERT_EQ(out->files.size(), 1u) << "the log rolled over";
  }
  ASSERT_EQ(out->durable.segment(), out->last) << "T is not in the last segment";
  for (size_t i = first_final; i < out->records.size(); ++i) {
    ASSERT_EQ(out->records[i].position.segment(), out->last) << "final batch crossed a segment";
  }
  ASSERT_EQ(out->records[first_final].position, out->durable)
      << "the final section does not start at T";
  const std::string& file = out->files.at(out->last);
  out->last_records = parse_segment(file, out->last);
  ASSERT_FALSE(out->last_records.empty());
  ASSERT_EQ(out->last_records.back().kind, seg::Kind::end) << "last segment has no end record";
  out->full_end = out->last_records.back().end;
  ASSERT_EQ(nonzero_after(file, 0), out->full_end) << "non-zero bytes after the end record";
  // Final section: the final batch's data records, close()'s sync marker, the end record.
  std::vector<seg::Kind> kinds;
  for (const Framed& f : out->last_records) {
    if (f.start >= out->durable.offset()) kinds.push_back(f.kind);
  }
  std::vector<seg::Kind> want(std::size(kFinalSizes), seg::Kind::data);
  want.push_back(seg::Kind::sync);
  want.push_back(seg::Kind::end);
  ASSERT_TRUE(kinds == want) << "unexpected records in the final section";
}

struct Expected {
  std::vector<Written> records;
  uint32_t end = 0;  // offset in the last segment where replay stops
  bool end_record_survives = false;
};

// The oracle. Records of earlier segments all survive. In the last segment a
// record survives a truncation to c iff it ends at or before c; it survives
// zeroing from c iff that leaves its bytes unchanged, i.e. its last non-zero
// byte lies before c (zeroing the padding, or payload bytes that were zero
// already, leaves a record exactly as written). Survivors form a prefix.
Expected expected_after_cut(const Built& log, uint32_t c, bool zeroed) {
  Expected e;
  std::map<uint32_t, bool> survives;  // start offset -> survives
  e.end = seg::kHeaderSize;
  for (const Framed& f : log.last_records) {
    const bool ok = (zeroed ? f.nonzero_end : f.end) <= c;
    if (!ok) break;
    survives[f.start] = true;
    e.end = f.end;
    if (f.kind == seg::Kind::end) e.end_record_survives = true;
  }
  for (const Written& w : log.records) {
    if (w.position.segment() < log.last ||
        survives.contains(static_cast<uint32_t>(w.position.offset()))) {
      e.records.push_back(w);
    }
  }
  return e;
}

// Replay must return exactly `want`: same positions, same bytes, same order.
int failures_so_far() {
  return testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
}

// Cuts the last segment at c in a fresh copy of the log in `work`, reopens,
// checks recovery and replay; with `continue_after`, appends, reopens and
// checks again.
void check_cut(const Built& log, const fs::path& work, uint32_t c, bool zeroed,
               bool continue_after) {
  SCOPED_TRACE(std::string(zeroed ? "zeroed" : "truncated") + " segment " +
               std::to_string(log.last) + " from byte " + std::to_string(c) + " (final section [" +
               std::to_string(log.durable.offset()) + ", " + std::to_string(log.full_end) + "))");
  Files files = log.files;
  std::string& last = files.at(log.last);
  if (zeroed) {
    std::fill(last.begin() + c, last.end(), '\0');
  } else {
    last.resize(c);
  }
  write_segments(work, files);
  const Expected want = expected_after_cut(log, c, zeroed);
  const Config cfg = periodic_config(work);

  std::vector<Written> all = want.records;
  {
    auto opened = Log::open(cfg);
    ASSERT_TRUE(opened.has_value()) << opened.error().describe();
    Log& l = **opened;
    const RecoveryReport& rep = l.recovery();
    EXPECT_TRUE(rep.damage.empty()) << "a torn tail is not damage: " << rep.damage[0].reason
                                    << " at " << rep.damage[0].at.to_string();
    EXPECT_EQ(rep.end, Position(log.last, want.end)) << rep.end.to_string();
    EXPECT_EQ(rep.records, want.records.size());
    EXPECT_EQ(rep.segments, files.size());
    const uint64_t left = nonzero_after(last, want.end);
    if (want.end_record_survives) {
      EXPECT_FALSE(rep.torn_tail) << "nothing was cut";
    } else if (left > 0) {
      EXPECT_TRUE(rep.torn_tail) << left << " written bytes after the end were dropped";
      EXPECT_EQ(rep.torn_bytes, left);
    } else if (zeroed) {
      EXPECT_FALSE(rep.torn_tail) << "only zeros after the end: a clean end";
    }
    EXPECT_TRUE(same_records(read_all(l), want.records)) << "first reopen";
    if (!continue_after) {
      auto closed = l.close();
      ASSERT_TRUE(closed.has_value()) << closed.error().describe();
      return;
    }

    // The log continues after the torn tail.
    for (size_t k = 0; k < 3; ++k) {
      Written w{Position{}, make_record(1000, c * 3 + k, 1 + 97 * k)};
      auto pos = l.append(w.data);
      ASSERT_TRUE(pos.has_value()) << pos.error().describe();
      EXPECT_GT(pos->segment(), log.last) << "new session must start a new segment";
      w.position = *pos;
      all.push_back(std::move(w));
    }
    auto closed = l.close();
    ASSERT_TRUE(closed.has_value()) << closed.error().describe();
  }
  RecoveryReport rep;
  auto again = replay_all(cfg, &rep);
  ASSERT_TRUE(again.has_value()) << again.error().describe();
  EXPECT_TRUE(rep.damage.empty()) << "after continuing: " << rep.damage[0].reason << " at "
                                  << rep.damage[0].at.to_string();
  EXPECT_FALSE(rep.torn_tail) << "after continuing";
  EXPECT_EQ(rep.records, all.size());
  EXPECT_TRUE(same_records(*again, all)) << "second reopen, after appending";
}

// Every opening is costly under a sanitizer (threads, file creation), so
// sanitizer builds cut at a subset of offsets: each record's header bytes and
// first payload byte, its last byte, and every 64th byte in between. Release
// builds cut at every byte (kSanitized, test_util.h), except on uring (see
// every_byte_here); what a sanitizer adds is
// the memory and race checking of each path, which the subset still takes.
// Continuing after the cut (append, reopen) is checked at that subset in
// every build: where the log continues depends on the end recovery found,
// always a record boundary, and the subset reaches every such end with torn
// bytes after it and without.

bool near_a_boundary(const Built& log, uint32_t c) {
  for (const Framed& f : log.last_records) {
    if (c >= f.start && c <= f.start + seg::kRecordHeaderSize) return true;
    if (c + 1 == f.end) return true;
  }
  return c == log.full_end;
}

bool at_a_record_edge(const Built& log, uint32_t c) {
  for (const Framed& f : log.last_records) {
    if (c == f.start || c == f.start + seg::kRecordHeaderSize || c + 1 == f.end) return true;
  }
  return c == log.full_end;
}

// uring and aio write the same direct-segment image through the same
// segment code, so the sweep of every byte runs on aio and uring takes the
// subset; under ASan uring is left out (its submission path is checked
// there by every other backend test).
bool every_byte_here() { return backend_under_test() != "uring"; }

void run_every_cut(bool roll_over, bool zeroed) {
  if (kSanitized && !kThreadSanitized && backend_under_test() == "uring")
    GTEST_SKIP() << "aio covers the direct-segment image under ASan";
  TempDir dir;
  Built log;
  ASSERT_NO_FATAL_FAILURE(build(dir.path() / "original", roll_over, &log));
  const fs::path work = dir.path() / "work";

  // Control: the uncut log replays every record.
  {
    write_segments(work, log.files);
    auto all = replay_all(periodic_config(work));
    ASSERT_TRUE(all.has_value()) << all.error().describe();
    ASSERT_TRUE(same_records(*all, log.records)) << "uncut log";
  }

  int failing_cuts = 0;
  size_t cuts = 0;
  for (uint32_t c = static_cast<uint32_t>(log.durable.offset()); c <= log.full_end; ++c) {
    const bool subset = near_a_boundary(log, c) || c % 64 == 3;
    if ((kSanitized || !every_byte_here()) && !subset) continue;
    // TSan looks for races, not for more offsets: each record's edges only.
    if (kThreadSanitized && !at_a_record_edge(log, c)) continue;
    ++cuts;
    const int before = failures_so_far();
    check_cut(log, work, c, zeroed, /*continue_after=*/subset);
    if (failures_so_far() != before && ++failing_cuts == 8) {
      ADD_FAILURE() << "stopping after 8 failing cuts";
      break;
    }
  }
  std::printf("%zu cuts of segment %ju over [%ju, %u]%s\n", cuts, static_cast<uintmax_t>(log.last),
              static_cast<uintmax_t>(log.durable.offset()), log.full_end,
              kThreadSanitized ? " (TSan build: each record's first, first payload and last byte)"
              : kSanitized || !every_byte_here() ? " (record headers, last bytes, every 64th byte)"
                                                 : "");
}

TEST(TornTail, TruncatedAtEveryByteOfTheFinalSectionInTheFirstSegment) {
  run_every_cut(/*roll_over=*/false, /*zeroed=*/false);
}

TEST(TornTail, ZeroedFromEveryByteOfTheFinalSectionInTheFirstSegment) {
  run_every_cut(/*roll_over=*/false, /*zeroed=*/true);
}

TEST(TornTail, TruncatedAtEveryByteOfTheFinalSectionAfterARollOver) {
  run_every_cut(/*roll_over=*/true, /*zeroed=*/false);
}

TEST(TornTail, ZeroedFromEveryByteOfTheFinalSectionAfterARollOver) {
  run_every_cut(/*roll_over=*/true, /*zeroed=*/true);
}

}  // namespace
}  // namespace synclog::test
