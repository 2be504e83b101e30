// Recovery over a chain of sessions: what one open leaves on disk must not
// mislead a later one.
//
// Path 3: a torn-tail recovery while a later segment holds valid records
// that no sync completed (never acknowledged), then a release that removes
// the older segments but not that one (a crash part-way through
// release_before). The next open must not start at the left-behind segment
// and replay its records (phantoms), nor lose the later session's records.
//
// Path 7: the lowest-id segment replaced by a same-named segment of another
// log. One file must not redefine which log the directory holds: the
// foreign file is the one refused or skipped, never the genuine ones, and
// skip-damaged never replays the other log's records.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "segments/format.h"
#include "segments/segment.h"
#include "test_util.h"

namespace synclog::test {
namespace {

namespace fs = std::filesystem;

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

struct Slot {
  seg::Kind kind;
  uint32_t start, end;
};

std::vector<Slot> records_of(const std::string& file, uint64_t id) {
  std::vector<Slot> out;
  for (uint32_t off = seg::kHeaderSize;;) {
    seg::Decoded d = seg::decode_record(bytes_of(file), id, off);
    if (d.status != seg::Decode::ok) break;
    out.push_back(Slot{d.record.kind, off, off + d.record.framed});
    off += d.record.framed;
    if (d.record.kind == seg::Kind::end) break;
  }
  return out;
}

// Tears segment `id` half-way through, as a crash does when no sync
// completed after that point: one data record garbled, every later sync
// marker gone. Returns the torn record's slot.
Slot tear_half_way(std::string& file, uint64_t id) {
  const std::vector<Slot> records = records_of(file, id);
  EXPECT_GT(records.size(), 10u);
  if (records.size() <= 10) return Slot{};
  const Slot torn = records[records.size() / 2];
  EXPECT_EQ(torn.kind, seg::Kind::data);
  for (uint32_t b = torn.start; b < torn.end; ++b) file[b] = static_cast<char>(file[b] ^ 0x5a);
  for (const Slot& r : records) {
    if (r.start > torn.start && r.kind == seg::Kind::sync)
      std::fill(file.begin() + r.start, file.begin() + r.end, '\0');
  }
  return torn;
}

TEST(RecoveryChain, Path3_PartialReleaseAfterATornTailReplaysNoPhantoms) {
  TempDir dir;
  const fs::path first = dir.path() / "first";
  fs::create_directories(first);
  // A closed log over three segments or more.
  {
    auto log = Log::open(small_config(first));
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    for (uint64_t i = 0; (*log)->durable().segment() < 3; ++i) {
      auto pos = (*log)->append(make_record(1, i, 3000));
      ASSERT_TRUE(pos.has_value()) << pos.error().describe();
    }
    ASSERT_TRUE((*log)->close().has_value());
  }
  Files files = load_segments(first);
  ASSERT_GE(files.size(), 3u);
  // The crash state: segment 2 torn half-way, and no completed sync after
  // that point, so segment 3's records were never acknowledged (their sync
  // markers did not get written). Segment 3 still holds valid data records.
  const Slot torn = tear_half_way(files.at(2), 2);
  ASSERT_FALSE(HasFailure());
  // Segment 3: its header, then records that no sync covered.
  {
    std::string& s3 = files.at(3);
    std::fill(s3.begin() + seg::kHeaderSize, s3.end(), '\0');
    auto image = std::as_writable_bytes(std::span(s3.data(), s3.size()));
    uint32_t off = seg::kHeaderSize;
    for (uint64_t i = 0; i < 5; ++i) {
      const std::string data = make_record(9, i, 200);
      seg::encode_record(image, 3, off, seg::Kind::data, bytes_of(data));
      off += seg::framed_size(static_cast<uint32_t>(data.size()));
    }
  }
  for (uint64_t id = 4; files.count(id) != 0; ++id) files.erase(id);
  ASSERT_EQ(records_of(files.at(3), 3).size(), 5u);

  const fs::path work = dir.path() / "work";
  write_segments(work, files);
  std::vector<Replayed> acked;
  uint64_t session_segment = 0;
  {
    auto log = Log::open(small_config(work));
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    ASSERT_TRUE((*log)->recovery().torn_tail);
    ASSERT_EQ((*log)->recovery().end, Position(2, torn.start));
    for (uint64_t i = 0; i < 30; ++i) {
      std::string data = make_record(2, i, 500);
      auto pos = (*log)->append(data);
      ASSERT_TRUE(pos.has_value()) << pos.error().describe();
      acked.push_back(Replayed{*pos, std::move(data)});
    }
    session_segment = acked.front().position.segment();
    ASSERT_TRUE((*log)->close().has_value());
  }
  ASSERT_GT(session_segment, 3u);
  // release_before(session start) removes segments 1, 2, 3 in that order;
  // the process dies after the first two.
  fs::remove(work / seg::segment_file_name(1));
  fs::remove(work / seg::segment_file_name(2));

  RecoveryReport report;
  auto got = replay_all(small_config(work), &report);
  ASSERT_TRUE(got.has_value()) << "open after the partial release: " << got.error().describe();
  EXPECT_TRUE(same_records(*got, acked)) << "phantom or lost records after a partial release";
  EXPECT_TRUE(report.damage.empty()) << report.damage.front().reason;
}

// A closed log of `segments` segments or more, in `dir`; returns its records.
std::vector<Replayed> write_log(const fs::path& dir, uint32_t thread, uint64_t segments) {
  fs::create_directories(dir);
  std::vector<Replayed> out;
  auto log = Log::open(small_config(dir));
  EXPECT_TRUE(log.has_value()) << log.error().describe();
  if (!log) return out;
  for (uint64_t i = 0; (*log)->durable().segment() < segments; ++i) {
    std::string data = make_record(thread, i, 3000);
    auto pos = (*log)->append(data);
    EXPECT_TRUE(pos.has_value()) << pos.error().describe();
    if (!pos) break;
    out.push_back(Replayed{*pos, std::move(data)});
  }
  EXPECT_TRUE((*log)->close().has_value());
  return out;
}

TEST(RecoveryChain, Path7_AnotherLogsSegmentCannotRedefineTheLog) {
  TempDir dir;
  const std::vector<Replayed> genuine = write_log(dir.path() / "genuine", 1, 3);
  const std::vector<Replayed> other = write_log(dir.path() / "other", 2, 2);
  ASSERT_FALSE(HasFailure());
  Files files = load_segments(dir.path() / "genuine");
  const Files foreign = load_segments(dir.path() / "other");
  ASSERT_GE(files.size(), 3u);
  files.at(1) = foreign.at(1);
  const std::string bad_name = seg::segment_file_name(1);
  const fs::path work = dir.path() / "work";

  for (RecoveryMode mode :
       {RecoveryMode::tolerate_torn_tail, RecoveryMode::point_in_time, RecoveryMode::absolute}) {
    SCOPED_TRACE(to_string(mode));
    write_segments(work, files);
    Config cfg = small_config(work);
    cfg.recovery = mode;
    auto log = Log::open(cfg);
    ASSERT_FALSE(log.has_value()) << "opened with another log's segment";
    EXPECT_EQ(log.error().code, Errc::bad_directory) << log.error().describe();
    EXPECT_NE(log.error().message.find(bad_name), std::string::npos)
        << "blames another file: " << log.error().message;
    for (uint64_t id = 2; id <= files.rbegin()->first; ++id) {
      EXPECT_EQ(log.error().message.find(seg::segment_file_name(id)), std::string::npos)
          << "blames a genuine file: " << log.error().message;
    }
  }
  // skip-damaged leaves the foreign file out and replays the genuine rest.
  write_segments(work, files);
  Config cfg = small_config(work);
  cfg.recovery = RecoveryMode::skip_damaged;
  RecoveryReport report;
  auto got = replay_all(cfg, &report);
  ASSERT_TRUE(got.has_value()) << got.error().describe();
  std::vector<Replayed> want;
  for (const Replayed& r : genuine) {
    if (r.position.segment() != 1) want.push_back(r);
  }
  EXPECT_TRUE(same_records(*got, want));
  ASSERT_FALSE(report.damage.empty());
  EXPECT_EQ(report.damage.front().at, Position(1, 0)) << report.damage.front().reason;
  for (const Damage& d : report.damage) {
    EXPECT_TRUE(d.at.segment() == 1)
        << "a genuine segment reported: " << d.at.to_string() << " " << d.reason;
  }
}

// Two segments, one of them another log's: neither can be told genuine, so
// every mode refuses, saying why.
TEST(RecoveryChain, Path7_ATieOnTheLogIdIsRefusedInEveryMode) {
  TempDir dir;
  (void)write_log(dir.path() / "genuine", 1, 2);
  (void)write_log(dir.path() / "other", 2, 2);
  ASSERT_FALSE(HasFailure());
  Files files = load_segments(dir.path() / "genuine");
  const Files foreign = load_segments(dir.path() / "other");
  for (uint64_t id = 3; files.count(id) != 0; ++id) files.erase(id);  // spares
  ASSERT_EQ(files.size(), 2u);
  files.at(1) = foreign.at(1);
  const fs::path work = dir.path() / "work";
  for (RecoveryMode mode : {RecoveryMode::tolerate_torn_tail, RecoveryMode::point_in_time,
                            RecoveryMode::absolute, RecoveryMode::skip_damaged}) {
    SCOPED_TRACE(to_string(mode));
    write_segments(work, files);
    Config cfg = small_config(work);
    cfg.recovery = mode;
    auto log = Log::open(cfg);
    ASSERT_FALSE(log.has_value()) << "opened a directory holding two logs";
    EXPECT_EQ(log.error().code, Errc::bad_directory) << log.error().describe();
    EXPECT_NE(log.error().message.find("disagree on the log id"), std::string::npos)
        << log.error().message;
  }
}

// An earlier recovery ended the log inside segment 2 (a torn tail), deleted
// the files after it and began a new session further on, whose session
// record names that end. With segment 2 then replaced by another log's file,
// the end it names cannot be read, but the session record still says why
// the ids in between are absent: skip-damaged reports the foreign file and
// nothing else, and replays the new session.
TEST(RecoveryChain, Path7_AForeignFileHoldingAnEarlierRecoverysEnd) {
  TempDir dir;
  const std::vector<Replayed> genuine = write_log(dir.path() / "genuine", 1, 3);
  (void)write_log(dir.path() / "other", 2, 2);
  ASSERT_FALSE(HasFailure());
  Files files = load_segments(dir.path() / "genuine");
  const Files foreign = load_segments(dir.path() / "other");
  const Slot torn = tear_half_way(files.at(2), 2);
  ASSERT_FALSE(HasFailure());
  // Segment 3 as an unused spare: its header and nothing after it.
  std::fill(files.at(3).begin() + seg::kHeaderSize, files.at(3).end(), '\0');
  for (uint64_t id = 4; files.count(id) != 0; ++id) files.erase(id);
  const fs::path work = dir.path() / "work";
  write_segments(work, files);
  std::vector<Replayed> want;
  for (const Replayed& r : genuine) {
    if (r.position.segment() == 1) want.push_back(r);
  }
  {
    auto log = Log::open(small_config(work));
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    ASSERT_EQ((*log)->recovery().end, Position(2, torn.start));
    for (uint64_t i = 0; i < 30; ++i) {
      std::string data = make_record(3, i, 500);
      auto pos = (*log)->append(data);
      ASSERT_TRUE(pos.has_value()) << pos.error().describe();
      want.push_back(Replayed{*pos, std::move(data)});
    }
    ASSERT_TRUE((*log)->close().has_value());
  }
  ASSERT_GT(want.back().position.segment(), 3u);
  Files now = load_segments(work);
  ASSERT_EQ(now.count(3), 0u) << "recovery kept a file after the torn tail";
  now.at(2) = foreign.at(2);
  write_segments(work, now);

  Config cfg = small_config(work);
  cfg.recovery = RecoveryMode::skip_damaged;
  RecoveryReport report;
  auto got = replay_all(cfg, &report);
  ASSERT_TRUE(got.has_value()) << got.error().describe();
  EXPECT_TRUE(same_records(*got, want));
  EXPECT_EQ(report.damage.size(), 1u);
  for (const Damage& d : report.damage) {
    EXPECT_EQ(d.at.segment(), 2u) << "reported beside the foreign file: " << d.at.to_string() << " "
                                  << d.reason;
  }
}

}  // namespace
}  // namespace synclog::test
