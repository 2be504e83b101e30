// plan_fragments (segments/fragments.h) at every start offset and around
// every size edge: the plan the appender writes is contiguous, covers the
// record exactly once, ends each segment it leaves, never passes capacity,
// and never needs more segments than the writer takes ahead of it.
#include "segments/fragments.h"

#include <gtest/gtest.h>

#include <string>

namespace synclog::seg {
namespace {

constexpr uint64_t kSegment = 64 << 10;
constexpr uint64_t kCapacity = kSegment - kRecordHeaderSize;

testing::AssertionResult well_formed(const FragmentPlan& p, uint64_t len, uint64_t start,
                                     uint64_t capacity) {
  auto fail = [&] {
    return testing::AssertionFailure() << "len " << len << " start " << start << ": ";
  };
  if (p.fragments.empty()) return fail() << "no fragments";
  const bool one = p.fragments.size() == 1;
  uint32_t segment = 0;
  uint64_t off = start, done = 0;
  size_t end = 0;
  for (size_t i = 0; i < p.fragments.size(); ++i) {
    const Fragment& f = p.fragments[i];
    const Kind want = one                           ? Kind::data
                      : i == 0                      ? Kind::first
                      : i + 1 == p.fragments.size() ? Kind::last
                                                    : Kind::middle;
    if (f.kind != want) return fail() << "fragment " << i << " is " << to_string(f.kind);
    // Only end records (one per segment left) lie between fragments.
    while (f.segment != segment) {
      if (end >= p.ends.size() || p.ends[end].segment != segment || p.ends[end].offset != off) {
        return fail() << "no end record at " << segment << ":" << off;
      }
      ++end;
      ++segment;
      off = kHeaderSize;
    }
    if (f.offset != off) return fail() << "fragment " << i << " at " << f.offset << " not " << off;
    if (f.from != done) return fail() << "fragment " << i << " starts at byte " << f.from;
    if (f.payload() > kMaxPayload || (!one && f.payload() == 0)) return fail() << "bad payload";
    done += f.bytes;
    off += framed_size(f.payload());
    if (off > capacity) return fail() << "fragment " << i << " ends past capacity at " << off;
  }
  if (done != len) return fail() << "covers " << done << " bytes";
  if (end != p.ends.size()) return fail() << "end records after the last fragment";
  if (p.segments != segment + 1 || p.last_end != off) return fail() << "segments or last_end";
  return testing::AssertionSuccess();
}

TEST(Fragments, EveryPlanIsContiguousCompleteAndBounded) {
  const uint64_t half = kSegment / 2 - kHeaderSize;
  const uint64_t fresh = kCapacity - kHeaderSize - kRecordHeaderSize;
  const uint64_t lens[] = {0,
                           1,
                           half,
                           half + 1,
                           fresh - 8,
                           fresh - 7,
                           fresh,
                           fresh + 1,
                           2 * fresh - 8,
                           2 * fresh,
                           5 * fresh + 3,
                           kMaxFragment - 8,
                           kMaxFragment,
                           kMaxPayload,
                           kMaxPayload + 1,
                           3 * uint64_t{kMaxPayload} + 5};
  for (uint64_t len : lens) {
    const uint64_t segment_size = len > 4 * kSegment ? 64ull << 20 : kSegment;
    const uint64_t cap = segment_size - kRecordHeaderSize;
    const uint32_t need = fragment_segments_needed(len, segment_size);
    // Every start in a small segment; in a large one the edges, and steps
    // between that land on the last KiB too.
    for (uint64_t start = kHeaderSize; start <= cap;
         start += segment_size == kSegment || start < 1024 || cap - start <= 1024
                      ? 8
                      : std::min<uint64_t>(4088, cap - 1024 - start)) {
      const FragmentPlan p = plan_fragments(len, start, cap);
      ASSERT_TRUE(well_formed(p, len, start, cap));
      // The writer takes `need` segments before it knows where it starts.
      ASSERT_LE(p.segments - 1, need) << "len " << len << " start " << start;
    }
  }
}

TEST(Fragments, ARecordThatFitsAfterASwitchIsOneDataRecord) {
  const uint64_t len = kCapacity - kHeaderSize - kRecordHeaderSize;  // fills a fresh segment
  const FragmentPlan p = plan_fragments(len, kCapacity, kCapacity);
  ASSERT_EQ(p.fragments.size(), 1u);
  EXPECT_EQ(p.fragments[0].kind, Kind::data);
  EXPECT_EQ(p.fragments[0].segment, 1u);
  EXPECT_EQ(p.last_end, kCapacity);
  ASSERT_EQ(p.ends.size(), 1u);
}

}  // namespace
}  // namespace synclog::seg
