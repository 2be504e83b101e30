// Recovery over a chain of sessions: what one open leaves on disk must not
// mislead a later one.
//
// Path 3: a torn-tail recovery while a later segment holds valid records
// that no sync completed (never acknowledged), then a release that removes
// the older segments but not that one (a crash part-way through
// release_before). The next open must not start at the left-behind segment
// and replay its records (phantoms), nor lose the later session's records.
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

testing::AssertionResult same_records(const std::vector<Replayed>& got,
                                      const std::vector<Replayed>& want) {
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (got[i].position != want[i].position || got[i].data != want[i].data) {
      return testing::AssertionFailure()
             << "record " << i << ": got " << got[i].position.to_string() << ", want "
             << want[i].position.to_string();
    }
  }
  if (got.size() != want.size()) {
    return testing::AssertionFailure() << "got " << got.size() << " records, want " << want.size();
  }
  return testing::AssertionSuccess();
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
  const std::vector<Slot> two = records_of(files.at(2), 2);
  ASSERT_GT(two.size(), 10u);
  const Slot torn = two[two.size() / 2];
  ASSERT_EQ(torn.kind, seg::Kind::data);
  std::string& s2 = files.at(2);
  for (uint32_t b = torn.start; b < torn.end; ++b) s2[b] = static_cast<char>(s2[b] ^ 0x5a);
  for (const Slot& r : two) {
    if (r.start > torn.start && r.kind == seg::Kind::sync)
      std::fill(s2.begin() + r.start, s2.begin() + r.end, '\0');
  }
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

}  // namespace
}  // namespace synclog::test
