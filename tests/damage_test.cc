// Damage: flip one bit anywhere in a segment. No corrupted record is ever
// returned; the default mode stops at the damaged record, skip_damaged skips
// exactly that record (when later sync markers prove it was durable) and
// reports it, absolute refuses to open and names where.
//
// Every data record's payload is a multiple of 8 bytes, so no record has
// padding and every byte of every record is covered by its checksum.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <random>
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
  uint64_t segment;
  seg::Kind kind;
  uint32_t start;
  uint32_t end;
  Position position() const { return Position(segment, start); }
};

constexpr uint32_t kSeed = 20240611;

Config config_for(const fs::path& dir, RecoveryMode mode) {
  Config c = small_config(dir);
  c.mode = SyncMode::periodic;
  c.interval = std::chrono::seconds(10);  // only explicit sync() calls make sync sections
  c.recovery = mode;
  return c;
}

// A closed log of several sync sections over at least four segments.
struct Built {
  Files files;
  std::vector<Written> records;  // data records in append order
  std::map<Position, std::string> by_position;
  std::vector<Framed> framed;  // every record of every segment, in log order
  Position durable;            // T: durable() after the last explicit sync()
  uint64_t total_bytes = 0;    // bytes covered by `framed`
};

void build(const fs::path& dir, Built* out) {
  fs::create_directories(dir);
  auto log = Log::open(config_for(dir, RecoveryMode::tolerate_torn_tail));
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  std::mt19937 rng(kSeed);
  uint64_t seq = 0;
  auto append = [&](uint32_t batch, size_t size) {
    ASSERT_EQ(size % 8, 0u);
    Written w{Position{}, make_record(batch, seq++, size)};
    auto pos = (*log)->append(w.data);
    ASSERT_TRUE(pos.has_value()) << pos.error().describe();
    w.position = *pos;
    out->records.push_back(std::move(w));
  };
  uint32_t batch = 0;
  // A batch: one large record (32..64 KiB) and three small ones (16..128
  // bytes), then a sync: about 20 sync sections over four segments.
  while ((*log)->durable().segment() < 4 || (*log)->durable().offset() < (64u << 10)) {
    ASSERT_NO_FATAL_FAILURE(
        append(batch, 8 * std::uniform_int_distribution<size_t>(4000, 8000)(rng)));
    for (int i = 0; i < 3; ++i) {
      ASSERT_NO_FATAL_FAILURE(append(batch, 8 * std::uniform_int_distribution<size_t>(2, 16)(rng)));
    }
    ASSERT_TRUE((*log)->sync().has_value());
    ++batch;
  }
  out->durable = (*log)->durable();
  // The final, unsynced section: close() adds its marker and the end record.
  for (size_t size : {16, 40, 1024, 4096}) ASSERT_NO_FATAL_FAILURE(append(batch, size));
  ASSERT_TRUE((*log)->close().has_value());

  for (const Written& w : out->records) out->by_position[w.position] = w.data;
  out->files = load_segments(dir);
  ASSERT_GE(out->files.size(), 4u);
  ASSERT_EQ(out->files.begin()->first, 1u);
  ASSERT_EQ(out->files.rbegin()->first, out->durable.segment()) << "T is not in the last segment";
  ASSERT_GT(out->records.back().position, out->durable);
  ASSERT_EQ(out->records.back().position.segment(), out->durable.segment());
  // Parse every segment: the records must tile it from the header to the end
  // record, with only zeros after it.
  size_t data_seen = 0;
  for (const auto& [id, file] : out->files) {
    ASSERT_EQ(file.size(), 256u << 10);
    auto bytes = std::as_bytes(std::span(file.data(), file.size()));
    uint32_t off = seg::kHeaderSize;
    for (;;) {
      seg::Decoded d = seg::decode_record(bytes, id, off);
      ASSERT_EQ(d.status, seg::Decode::ok) << "segment " << id << " offset " << off;
      ASSERT_EQ(d.record.framed, seg::kRecordHeaderSize + d.record.payload.size()) << "padding";
      out->framed.push_back(Framed{id, d.record.kind, off, off + d.record.framed});
      out->total_bytes += d.record.framed;
      if (d.record.kind == seg::Kind::data) {
        ASSERT_LT(data_seen, out->records.size());
        ASSERT_EQ(out->records[data_seen].position, Position(id, off));
        ++data_seen;
      }
      off += d.record.framed;
      if (d.record.kind == seg::Kind::end) break;
    }
    ASSERT_TRUE(std::all_of(file.begin() + off, file.end(), [](char ch) { return ch == '\0'; }))
        << "bytes after the end record of segment " << id;
  }
  ASSERT_EQ(data_seen, out->records.size());
  ASSERT_EQ(out->framed.front().kind, seg::Kind::session);
}

// The invariant of this file, checked on every replay: a returned record was
// appended at exactly that position with exactly these bytes (G3).
void expect_genuine(const Built& log, const std::vector<Replayed>& got) {
  int bad = 0;
  for (const Replayed& r : got) {
    uint32_t thread = 0;
    uint64_t seq = 0;
    auto it = log.by_position.find(r.position);
    const bool ok =
        check_record(r.data, &thread, &seq) && it != log.by_position.end() && it->second == r.data;
    if (!ok && bad++ < 3) {
      ADD_FAILURE() << "corrupted or invented record returned at " << r.position.to_string() << " ("
                    << r.data.size() << " bytes)";
    }
  }
}

template <class Pred>
std::vector<Written> select(const Built& log, Pred keep) {
  std::vector<Written> out;
  for (const Written& w : log.records) {
    if (keep(w.position)) out.push_back(w);
  }
  return out;
}

// True if `msg` contains "<word> <n>" not followed by another digit.
bool names(const std::string& msg, const std::string& word, uint64_t n) {
  const std::string needle = word + " " + std::to_string(n);
  for (size_t at = msg.find(needle); at != std::string::npos; at = msg.find(needle, at + 1)) {
    const size_t after = at + needle.size();
    if (after == msg.size() || !std::isdigit(static_cast<unsigned char>(msg[after]))) return true;
  }
  return false;
}

struct Opened {
  std::unique_ptr<Log> log;
  RecoveryReport report;
  std::vector<Replayed> records;
};

// Writes `files` to a fresh `work` directory and opens it in `mode`; on
// success replays everything (checking the invariant) and closes.
Result<Opened> open_copy(const Built& log, const Files& files, const fs::path& work,
                         RecoveryMode mode) {
  write_segments(work, files);
  auto l = Log::open(config_for(work, mode));
  if (!l) return std::unexpected(l.error());
  Opened o;
  o.report = (*l)->recovery();
  o.records = read_all(**l);
  expect_genuine(log, o.records);
  EXPECT_EQ(o.report.records, o.records.size()) << "report.records";
  EXPECT_EQ(o.report.segments, files.size()) << "report.segments: segment files found";
  auto closed = (*l)->close();
  EXPECT_TRUE(closed.has_value()) << closed.error().describe();
  // Opening never alters or removes a segment file it was given: damaged
  // files hold durable records and stay for inspection and salvage (G6).
  // (Only segments past a torn tail may go, and here nothing lies past one.)
  const Files after = load_segments(work);
  for (const auto& [id, bytes] : files) {
    auto it = after.find(id);
    EXPECT_TRUE(it != after.end() && it->second == bytes)
        << "segment file " << seg::segment_file_name(id) << " was "
        << (it == after.end() ? "removed" : "overwritten") << " by open/close in mode "
        << to_string(mode);
  }
  return o;
}

std::string describe_damage(const RecoveryReport& r) {
  std::string s = "torn_tail=" + std::to_string(r.torn_tail) + " damage=[";
  for (const Damage& d : r.damage) {
    s += "{" + d.at.to_string() + ", " + std::to_string(d.bytes) + ", " + d.reason + "} ";
  }
  return s + "]";
}

int failures_so_far() {
  return testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
}

class Damage : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(build(dir_.path() / "original", &log_));
    work_ = dir_.path() / "work";
  }

  TempDir dir_;
  Built log_;
  fs::path work_;
};

TEST_F(Damage, UndamagedLogReplaysEverythingInEveryMode) {
  for (RecoveryMode mode : {RecoveryMode::tolerate_torn_tail, RecoveryMode::point_in_time,
                            RecoveryMode::skip_damaged, RecoveryMode::absolute}) {
    SCOPED_TRACE(to_string(mode));
    auto o = open_copy(log_, log_.files, work_, mode);
    ASSERT_TRUE(o.has_value()) << o.error().describe();
    EXPECT_TRUE(o->report.damage.empty()) << describe_damage(o->report);
    EXPECT_FALSE(o->report.torn_tail);
    EXPECT_TRUE(same_records(o->records, log_.records));
  }
}

TEST_F(Damage, OneFlippedBitAnywhereInARecord) {
  // Recovery reads the damaged files on one thread whatever wrote them, so
  // TSan has nothing to add on a second backend.
  if (kThreadSanitized && backend_under_test() != "msync-pool")
    GTEST_SKIP() << "TSan runs this sweep on msync-pool only";
  // The image is the segment kind's, not the backend's: msync-pool writes
  // msync's mmap image and uring aio's direct one.
  if (!kSanitized && (backend_under_test() == "msync-pool" || backend_under_test() == "uring"))
    GTEST_SKIP() << "msync and aio sweep the same images";
  // Sample offsets: a byte of every record's header, a byte of every
  // record's payload, then uniform over all record bytes, up to 300.
  std::mt19937 rng(kSeed);
  struct Sample {
    size_t record;  // index into log_.framed
    uint32_t byte;  // file offset
    int bit;
  };
  std::vector<Sample> samples;
  auto pick = [&](uint32_t lo, uint32_t hi) {
    return std::uniform_int_distribution<uint32_t>(lo, hi - 1)(rng);
  };
  // Sanitizer builds (every opening is costly there): one sample per record,
  // alternately in its header and its payload, and 120 in all. TSan looks
  // for races rather than for more bit positions: one sample in every record
  // of a kind other than data, and in every 4th data record.
  const size_t budget = kThreadSanitized ? 0 : kSanitized ? 120 : 300;
  auto sampled = [&](size_t i) {
    return !kThreadSanitized || log_.framed[i].kind != seg::Kind::data || i % 4 == 0;
  };
  for (size_t i = 0; i < log_.framed.size(); ++i) {
    const Framed& f = log_.framed[i];
    if (!sampled(i)) continue;
    const bool has_payload = f.end > f.start + seg::kRecordHeaderSize;
    if (!kSanitized || i % 2 == 0 || !has_payload) {
      samples.push_back(
          {i, pick(f.start, f.start + seg::kRecordHeaderSize), static_cast<int>(pick(0, 8))});
    }
    if (has_payload && (!kSanitized || i % 2 == 1)) {
      samples.push_back(
          {i, pick(f.start + seg::kRecordHeaderSize, f.end), static_cast<int>(pick(0, 8))});
    }
  }
  if (budget > 0) {
    ASSERT_LE(samples.size(), budget) << "the log has too many records for the sample budget";
  }
  while (samples.size() < budget) {
    uint64_t k = std::uniform_int_distribution<uint64_t>(0, log_.total_bytes - 1)(rng);
    size_t i = 0;
    for (; k >= log_.framed[i].end - log_.framed[i].start; ++i)
      k -= log_.framed[i].end - log_.framed[i].start;
    samples.push_back(
        {i, static_cast<uint32_t>(log_.framed[i].start + k), static_cast<int>(pick(0, 8))});
  }

  const Position T = log_.durable;
  // The samples must cover every record, every kind, and both sides of T.
  {
    std::vector<bool> hit(log_.framed.size());
    std::map<std::string, int> kinds;
    int durable = 0, unfinished = 0;
    for (const Sample& smp : samples) {
      const Framed& r = log_.framed[smp.record];
      ASSERT_GE(smp.byte, r.start);
      ASSERT_LT(smp.byte, r.end);
      hit[smp.record] = true;
      ++kinds[seg::to_string(r.kind)];
      ++(r.position() < T ? durable : unfinished);
    }
    for (size_t i = 0; i < hit.size(); ++i) EXPECT_TRUE(hit[i] || !sampled(i)) << "record " << i;
    for (const char* k : {"data", "sync", "end", "session"}) EXPECT_GT(kinds[k], 0) << k;
    EXPECT_GT(durable, 0);
    EXPECT_GT(unfinished, 0);
    std::printf(
        "%zu samples over %zu records in %zu segments: %d data, %d sync, %d end, %d session; "
        "%d before T=%s, %d in the final section\n",
        samples.size(), log_.framed.size(), log_.files.size(), kinds["data"], kinds["sync"],
        kinds["end"], kinds["session"], durable, T.to_string().c_str(), unfinished);
  }
  int failing = 0;
  for (size_t n = 0; n < samples.size(); ++n) {
    const Sample& smp = samples[n];
    const Framed& r = log_.framed[smp.record];
    const Position p = r.position();
    SCOPED_TRACE("seed " + std::to_string(kSeed) + " sample " + std::to_string(n) + ": bit " +
                 std::to_string(smp.bit) + " of segment " + std::to_string(r.segment) + " byte " +
                 std::to_string(smp.byte) + ", in the " + seg::to_string(r.kind) + " record at " +
                 p.to_string() + " [" + std::to_string(r.start) + ", " + std::to_string(r.end) +
                 "); T=" + T.to_string());
    const int before = failures_so_far();
    Files files = log_.files;
    files.at(r.segment)[smp.byte] ^= static_cast<char>(1 << smp.bit);
    const auto before_p = select(log_, [&](Position q) { return q < p; });

    // Default: refuses proven damage, naming it and the modes that accept
    // it; drops only an unfinished write.
    {
      auto o = open_copy(log_, files, work_, RecoveryMode::tolerate_torn_tail);
      if (p < T) {
        ASSERT_FALSE(o.has_value()) << "the default mode accepted proven damage";
        EXPECT_EQ(o.error().code, Errc::corruption) << o.error().describe();
        EXPECT_TRUE(names(o.error().message, "segment", p.segment())) << o.error().message;
        EXPECT_TRUE(names(o.error().message, "offset", p.offset())) << o.error().message;
        EXPECT_NE(o.error().message.find("recovery=point-in-time"), std::string::npos)
            << o.error().message;
      } else {
        ASSERT_TRUE(o.has_value()) << o.error().describe();
        EXPECT_TRUE(same_records(o->records, before_p)) << "default mode";
        EXPECT_TRUE(o->report.torn_tail) << describe_damage(o->report);
        EXPECT_TRUE(o->report.damage.empty()) << describe_damage(o->report);
      }
    }
    // point_in_time: stops at the damaged record.
    {
      auto o = open_copy(log_, files, work_, RecoveryMode::point_in_time);
      ASSERT_TRUE(o.has_value()) << o.error().describe();
      EXPECT_TRUE(same_records(o->records, before_p)) << "point-in-time mode";
      EXPECT_EQ(o->report.end, p) << o->report.end.to_string();
      if (p < T) {
        // Later sync markers prove the record was durable: damage, not a torn tail.
        EXPECT_FALSE(o->report.torn_tail) << describe_damage(o->report);
        ASSERT_EQ(o->report.damage.size(), 1u) << describe_damage(o->report);
        EXPECT_EQ(o->report.damage[0].at, p) << describe_damage(o->report);
      } else {
        EXPECT_TRUE(o->report.torn_tail) << describe_damage(o->report);
        EXPECT_TRUE(o->report.damage.empty()) << describe_damage(o->report);
      }
    }
    // skip_damaged: skips exactly the damaged record if it was durable.
    {
      auto o = open_copy(log_, files, work_, RecoveryMode::skip_damaged);
      ASSERT_TRUE(o.has_value()) << o.error().describe();
      if (p < T) {
        auto want = select(log_, [&](Position q) { return q != p; });
        EXPECT_TRUE(same_records(o->records, want)) << "skip mode";
        EXPECT_FALSE(o->report.torn_tail) << describe_damage(o->report);
        ASSERT_EQ(o->report.damage.size(), 1u) << describe_damage(o->report);
        EXPECT_EQ(o->report.damage[0].at, p) << describe_damage(o->report);
        // The skipped region runs to the next record, or to the end of the file.
        const bool next_in_segment =
            smp.record + 1 < log_.framed.size() && log_.framed[smp.record + 1].segment == r.segment;
        const uint64_t skipped =
            next_in_segment ? r.end - r.start : files.at(r.segment).size() - r.start;
        EXPECT_EQ(o->report.damage[0].bytes, skipped) << describe_damage(o->report);
        EXPECT_EQ(o->report.end, Position(log_.files.rbegin()->first, log_.framed.back().end));
      } else {
        EXPECT_TRUE(same_records(o->records, before_p)) << "skip mode, final section";
        EXPECT_EQ(o->report.end, p);
        EXPECT_TRUE(o->report.torn_tail) << describe_damage(o->report);
        EXPECT_TRUE(o->report.damage.empty()) << describe_damage(o->report);
      }
    }
    // absolute: refuses, naming the place.
    {
      auto o = open_copy(log_, files, work_, RecoveryMode::absolute);
      ASSERT_FALSE(o.has_value()) << "absolute mode opened a damaged log";
      EXPECT_EQ(o.error().code, Errc::corruption) << o.error().describe();
      EXPECT_TRUE(names(o.error().message, "segment", p.segment())) << o.error().message;
      EXPECT_TRUE(names(o.error().message, "offset", p.offset())) << o.error().message;
    }
    if (failures_so_far() != before && ++failing == 10) {
      ADD_FAILURE() << "stopping after 10 failing samples";
      break;
    }
  }
}

TEST_F(Damage, BadSegmentHeader) {
  // Each header field: magic, version, flags, id, size, block size, reserved, checksum.
  std::mt19937 rng(kSeed + 1);
  for (const auto& [id, file] : log_.files) {
    for (uint32_t byte : {0u, 7u, 8u, 12u, 16u, 24u, 32u, 40u, 60u, 63u}) {
      const int bit = static_cast<int>(rng() % 8);
      const int before = failures_so_far();
      SCOPED_TRACE("segment " + std::to_string(id) + " header byte " + std::to_string(byte) +
                   " bit " + std::to_string(bit));
      Files files = log_.files;
      files.at(id)[byte] ^= static_cast<char>(1 << bit);
      const std::string name = seg::segment_file_name(id);
      for (RecoveryMode mode : {RecoveryMode::tolerate_torn_tail, RecoveryMode::point_in_time,
                                RecoveryMode::absolute}) {
        SCOPED_TRACE(to_string(mode));
        auto o = open_copy(log_, files, work_, mode);
        ASSERT_FALSE(o.has_value()) << "opened with a bad segment header";
        EXPECT_EQ(o.error().code, Errc::bad_directory) << o.error().describe();
        EXPECT_NE(o.error().message.find(name), std::string::npos) << o.error().message;
      }
      auto o = open_copy(log_, files, work_, RecoveryMode::skip_damaged);
      ASSERT_TRUE(o.has_value()) << o.error().describe();
      // One damage entry: the whole file, named; the file is there, so it is
      // not also "missing".
      EXPECT_EQ(o->report.damage.size(), 1u) << describe_damage(o->report);
      auto d = std::find_if(o->report.damage.begin(), o->report.damage.end(),
                            [&](const synclog::Damage& x) { return x.at == Position(id, 0); });
      ASSERT_NE(d, o->report.damage.end()) << describe_damage(o->report);
      EXPECT_EQ(d->bytes, file.size()) << describe_damage(o->report);
      EXPECT_NE(d->reason.find(name), std::string::npos) << d->reason;
      EXPECT_FALSE(o->report.torn_tail);
      EXPECT_TRUE(
          same_records(o->records, select(log_, [&](Position q) { return q.segment() != id; })));
      if (failures_so_far() != before) break;  // one failing header byte per segment is enough
    }
  }
}

TEST_F(Damage, MissingMiddleSegment) {
  const uint64_t last = log_.files.rbegin()->first;
  for (uint64_t gone = 2; gone < last; ++gone) {
    SCOPED_TRACE("segment " + std::to_string(gone) + " deleted");
    Files files = log_.files;
    files.erase(gone);
    {
      auto o = open_copy(log_, files, work_, RecoveryMode::tolerate_torn_tail);
      ASSERT_FALSE(o.has_value()) << "the default mode opened a log with a missing segment";
      EXPECT_EQ(o.error().code, Errc::corruption) << o.error().describe();
      EXPECT_TRUE(names(o.error().message, "segment", gone)) << o.error().message;
    }
    {
      auto o = open_copy(log_, files, work_, RecoveryMode::point_in_time);
      ASSERT_TRUE(o.has_value()) << o.error().describe();
      EXPECT_TRUE(
          same_records(o->records, select(log_, [&](Position q) { return q.segment() < gone; })));
      ASSERT_EQ(o->report.damage.size(), 1u) << describe_damage(o->report);
      EXPECT_EQ(o->report.damage[0].at, Position(gone, 0)) << describe_damage(o->report);
      EXPECT_FALSE(o->report.torn_tail);
    }
    {
      auto o = open_copy(log_, files, work_, RecoveryMode::absolute);
      ASSERT_FALSE(o.has_value()) << "absolute mode opened a log with a missing segment";
      EXPECT_EQ(o.error().code, Errc::corruption) << o.error().describe();
      EXPECT_TRUE(names(o.error().message, "segment", gone)) << o.error().message;
    }
    {
      auto o = open_copy(log_, files, work_, RecoveryMode::skip_damaged);
      ASSERT_TRUE(o.has_value()) << o.error().describe();
      EXPECT_TRUE(
          same_records(o->records, select(log_, [&](Position q) { return q.segment() != gone; })));
      ASSERT_EQ(o->report.damage.size(), 1u) << describe_damage(o->report);
      EXPECT_EQ(o->report.damage[0].at, Position(gone, 0)) << describe_damage(o->report);
      EXPECT_FALSE(o->report.torn_tail);
    }
  }
}

// Two problems side by side: segment 2's header is damaged and segment 3 is
// gone. skip_damaged must report both regions; replay returns segments 1
// and 4 onwards.
TEST_F(Damage, BadHeaderNextToAMissingSegment) {
  ASSERT_GE(log_.files.size(), 4u);
  Files files = log_.files;
  files.at(2)[0] ^= 1;  // magic
  files.erase(3);
  for (RecoveryMode mode :
       {RecoveryMode::tolerate_torn_tail, RecoveryMode::point_in_time, RecoveryMode::absolute}) {
    SCOPED_TRACE(to_string(mode));
    auto o = open_copy(log_, files, work_, mode);
    ASSERT_FALSE(o.has_value()) << "opened with a bad segment header";
    EXPECT_EQ(o.error().code, Errc::bad_directory) << o.error().describe();
  }
  auto o = open_copy(log_, files, work_, RecoveryMode::skip_damaged);
  ASSERT_TRUE(o.has_value()) << o.error().describe();
  auto reported = [&](uint64_t id) {
    return std::any_of(o->report.damage.begin(), o->report.damage.end(),
                       [&](const synclog::Damage& d) { return d.at == Position(id, 0); });
  };
  EXPECT_TRUE(reported(2)) << "bad header not reported: " << describe_damage(o->report);
  EXPECT_TRUE(reported(3)) << "missing segment not reported: " << describe_damage(o->report);
  EXPECT_EQ(o->report.damage.size(), 2u) << describe_damage(o->report);
  EXPECT_TRUE(same_records(
      o->records, select(log_, [](Position q) { return q.segment() != 2 && q.segment() != 3; })));
}

// A loss that a mode accepted stays visible: the accepting open writes a
// loss record, and every later open, in the default mode too, lists it in
// `accepted` and opens (the loss was accepted already), replaying the later
// session's records after what was kept.
TEST_F(Damage, AcceptedLossIsRecordedAndReportedByEveryLaterOpen) {
  // A data record in the middle of the log, well before T.
  const Written* victim = nullptr;
  for (const Written& w : log_.records) {
    if (w.position.segment() == 2 && w.data.size() > 1000) {
      victim = &w;
      break;
    }
  }
  ASSERT_NE(victim, nullptr);
  const Position p = victim->position;
  ASSERT_LT(p, log_.durable);
  Files files = log_.files;
  files.at(p.segment())[p.offset() + seg::kRecordHeaderSize + 100] ^= 0x10;

  for (RecoveryMode accepting : {RecoveryMode::point_in_time, RecoveryMode::skip_damaged}) {
    SCOPED_TRACE(std::string("accepted by ") + to_string(accepting));
    write_segments(work_, files);
    // The default mode refuses it...
    {
      auto refused = Log::open(config_for(work_, RecoveryMode::tolerate_torn_tail));
      ASSERT_FALSE(refused.has_value());
      EXPECT_EQ(refused.error().code, Errc::corruption) << refused.error().describe();
    }
    // ...the accepting mode keeps what it can, and the new session appends.
    std::vector<Written> want = accepting == RecoveryMode::point_in_time
                                    ? select(log_, [&](Position q) { return q < p; })
                                    : select(log_, [&](Position q) { return q != p; });
    uint64_t lost_bytes = 0;
    {
      auto log = Log::open(config_for(work_, accepting));
      ASSERT_TRUE(log.has_value()) << log.error().describe();
      const RecoveryReport& r = (*log)->recovery();
      ASSERT_EQ(r.damage.size(), 1u) << describe_damage(r);
      EXPECT_EQ(r.damage[0].at, p);
      EXPECT_TRUE(r.accepted.empty());
      lost_bytes = r.damage[0].bytes;
      for (int i = 0; i < 20; ++i) {
        Written w{Position{}, make_record(99, static_cast<uint64_t>(i), 64)};
        auto pos = (*log)->append(w.data);
        ASSERT_TRUE(pos.has_value()) << pos.error().describe();
        w.position = *pos;
        want.push_back(std::move(w));
      }
      ASSERT_TRUE((*log)->close().has_value());
    }
    // Every later open, in every mode that opens the log at all, says what
    // was dropped.
    for (RecoveryMode later : {RecoveryMode::tolerate_torn_tail, RecoveryMode::point_in_time,
                               RecoveryMode::skip_damaged, RecoveryMode::tolerate_torn_tail}) {
      SCOPED_TRACE(std::string("reopened with ") + to_string(later));
      auto log = Log::open(config_for(work_, later));
      ASSERT_TRUE(log.has_value()) << log.error().describe();
      const RecoveryReport& r = (*log)->recovery();
      ASSERT_EQ(r.accepted.size(), 1u) << "accepted losses lost";
      EXPECT_EQ(r.accepted[0].at, p);
      EXPECT_EQ(r.accepted[0].bytes, lost_bytes);
      EXPECT_NE(r.accepted[0].reason.find("record checksum mismatch"), std::string::npos)
          << r.accepted[0].reason;
      EXPECT_NE(r.accepted[0].reason.find(std::string("recovery=") + to_string(accepting)),
                std::string::npos)
          << r.accepted[0].reason;
      EXPECT_TRUE(same_records(read_all(**log), want));
      ASSERT_TRUE((*log)->close().has_value());
    }
  }
}

}  // namespace
}  // namespace synclog::test
