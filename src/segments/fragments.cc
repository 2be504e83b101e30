#include "segments/fragments.h"

#include <algorithm>

namespace synclog::seg {

FragmentPlan plan_fragments(uint64_t len, uint64_t start, uint64_t capacity, uint32_t overhead) {
  FragmentPlan p;
  uint32_t segment = 0;
  uint64_t off = start;
  uint64_t done = 0;
  while (done < len || p.fragments.empty()) {
    const uint64_t room = capacity > off ? capacity - off : 0;
    if (room < kMinFragmentRoom + overhead) {
      p.ends.push_back(FragmentPlan::End{segment, static_cast<uint32_t>(off)});
      ++segment;
      off = kHeaderSize;
      continue;
    }
    const bool first = p.fragments.empty();
    // A record that fits where it starts, or after the switches before it,
    // is one data record: a lone "last" fragment would have no first.
    if (first && len + overhead <= kMaxPayload &&
        off + framed_size(static_cast<uint32_t>(len + overhead)) <= capacity) {
      p.fragments.push_back(
          Fragment{segment, static_cast<uint32_t>(off), Kind::data, 0, static_cast<uint32_t>(len)});
      p.segments = segment + 1;
      p.last_end = off + framed_size(static_cast<uint32_t>(len + overhead));
      return p;
    }
    const uint64_t fixed = first ? kFirstFixedPayload : 0;
    const uint64_t fits =
        std::min<uint64_t>(room - kRecordHeaderSize, kMaxFragment) - fixed - overhead;
    const auto bytes = static_cast<uint32_t>(std::min<uint64_t>(fits, len - done));
    p.fragments.push_back(Fragment{segment, static_cast<uint32_t>(off),
                                   first ? Kind::first : Kind::middle, done, bytes});
    done += bytes;
    off += framed_size(static_cast<uint32_t>(fixed + bytes + overhead));
  }
  p.fragments.back().kind = Kind::last;
  p.segments = segment + 1;
  p.last_end = off;
  return p;
}

uint32_t fragment_segments_needed(uint64_t len, uint64_t segment_size, uint32_t overhead) {
  const uint64_t capacity = segment_size - kRecordHeaderSize;
  const uint64_t after_session = kHeaderSize + framed_size(kPositionPayload);
  return plan_fragments(len, after_session, capacity, overhead).segments;
}

}  // namespace synclog::seg
