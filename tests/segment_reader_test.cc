// The streaming segment reader gives, through windows of any size, exactly
// what decoding the whole file gives: every record (ones larger than the
// window too), the same verdict where records stop, and the same bytes.
#include "segments/segment_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "segments/format.h"
#include "segments/segment.h"
#include "test_util.h"

namespace synclog::test {
namespace {

// A log of records from 1 byte to 40 KiB in 256 KiB segments; returns the
// first segment's path and bytes.
std::pair<std::filesystem::path, std::string> write_segment(const std::filesystem::path& dir) {
  Config cfg = small_config(dir);
  cfg.mode = SyncMode::periodic;
  auto log = Log::open(cfg);
  EXPECT_TRUE(log.has_value()) << log.error().describe();
  Position first;
  for (uint64_t i = 0;; ++i) {
    const size_t size = 16 + (i * 7919) % (i % 9 == 0 ? 40000 : 700);
    auto p = (*log)->append(make_record(0, i, size));
    EXPECT_TRUE(p.has_value());
    if (i == 0) first = *p;
    if (p->segment() > first.segment()) break;
  }
  EXPECT_TRUE((*log)->close().has_value());
  const auto path = dir / seg::segment_file_name(first.segment());
  return {path, load_segments(dir).at(first.segment())};
}

void expect_same_walk(const std::filesystem::path& path, uint64_t id, const std::string& whole,
                      size_t window, uint64_t limit) {
  const auto image = std::as_bytes(std::span(whole)).first(std::min<uint64_t>(whole.size(), limit));
  auto reader = seg::SegmentReader::open(path, id, limit, window);
  ASSERT_TRUE(reader.has_value()) << reader.error().describe();
  size_t records = 0, large = 0;
  uint32_t off = seg::kHeaderSize;
  for (;;) {
    const seg::Decoded want = seg::decode_record(image, id, off);
    auto got = reader->record(off);
    ASSERT_TRUE(got.has_value()) << got.error().describe();
    ASSERT_EQ(got->status, want.status) << "window " << window << " offset " << off;
    ASSERT_EQ(std::string(got->reason ? got->reason : ""), want.reason ? want.reason : "");
    if (want.status != seg::Decode::ok) break;
    ASSERT_EQ(got->record.kind, want.record.kind);
    ASSERT_EQ(got->record.framed, want.record.framed);
    ASSERT_TRUE(std::equal(got->record.payload.begin(), got->record.payload.end(),
                           want.record.payload.begin(), want.record.payload.end()))
        << "window " << window << " offset " << off;
    ++records;
    if (want.record.framed > window) ++large;
    off += want.record.framed;
    if (want.record.kind == seg::Kind::end) break;
  }
  EXPECT_GT(records, 40u);
  if (window < 40000) {
    EXPECT_GT(large, 0u) << "no record was larger than the window";
  }
  // Bytes read back at odd offsets and lengths, across window edges.
  for (uint64_t at = 0; at < image.size(); at += 4093) {
    auto b = reader->bytes(at, 5000);
    ASSERT_TRUE(b.has_value());
    const size_t n = std::min<uint64_t>(5000, image.size() - at);
    ASSERT_EQ(b->size(), n);
    ASSERT_TRUE(std::equal(b->begin(), b->end(), image.begin() + at)) << at;
  }
}

TEST(SegmentReader, AnyWindowGivesWhatTheWholeFileGives) {
  TempDir dir;
  const auto [path, whole] = write_segment(dir.path());
  uint64_t id = 0;
  ASSERT_TRUE(seg::parse_segment_file_name(path.filename().string(), &id));
  for (size_t window :
       {size_t{8}, size_t{100}, size_t{4096}, size_t{65536}, seg::SegmentReader::kWindow}) {
    expect_same_walk(path, id, whole, window, UINT64_MAX);
  }
}

// The furthest byte any read of the file reached.
class ReadEnd final : public io::Hook {
 public:
  int access(const io::Event& e) override {
    if (e.op == io::Op::read) end_.store(std::max(end_.load(), e.offset + e.length));
    return 0;
  }
  uint64_t end() const { return end_.load(); }

 private:
  std::atomic<uint64_t> end_{0};
};

TEST(SegmentReader, ReadsNothingAtOrPastTheLimit) {
  TempDir dir;
  const auto [path, whole] = write_segment(dir.path());
  uint64_t id = 0;
  ASSERT_TRUE(seg::parse_segment_file_name(path.filename().string(), &id));
  // The limit cuts a record: it reads as cut off by the end, as in a file
  // of that length.
  for (uint64_t limit : {uint64_t{100000}, uint64_t{100003}, uint64_t{150000}}) {
    ReadEnd reads;
    HookGuard guard(&reads);
    expect_same_walk(path, id, whole, 4096, limit);
    EXPECT_LE(reads.end(), limit);
    EXPECT_GT(reads.end(), limit - 4096);
  }
}

}  // namespace
}  // namespace synclog::test
