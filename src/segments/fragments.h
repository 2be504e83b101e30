// Where the fragments of a record too large for one data record go
// (docs/format.md, "Fragmented records"). A record starts at some offset of
// a segment; fragments fill each segment up to its capacity (at most
// kMaxFragment bytes of payload each), then an end record, then they go on
// at offset 64 of the next segment. A record that fits where it starts is
// one data record. Pure arithmetic: the appender writes what it says, the
// config sizes its spare needs with it.
#pragma once

#include <cstdint>
#include <vector>

#include "segments/format.h"

namespace synclog::seg {

// The most payload one fragment carries: a multiple of 8 below the 24-bit
// length limit, so the fragment after it starts aligned.
inline constexpr uint32_t kMaxFragment = kMaxPayload & ~(kAlign - 1);
// A segment tail smaller than this holds no fragment, only the end record.
inline constexpr uint64_t kMinFragmentRoom = 32;

struct Fragment {
  uint32_t segment = 0;  // 0 = the segment the record starts in, then 1, 2...
  uint32_t offset = 0;
  Kind kind = Kind::data;
  uint64_t from = 0;  // the record's bytes [from, from + bytes) follow any fixed part
  uint32_t bytes = 0;
  // Plain payload bytes (a stored fragment adds the plan's overhead).
  uint32_t payload() const { return bytes + (kind == Kind::first ? kFirstFixedPayload : 0); }
};

struct FragmentPlan {
  std::vector<Fragment> fragments;
  // End records: the segment index and its offset; one for every segment
  // the record leaves.
  struct End {
    uint32_t segment;
    uint32_t offset;
  };
  std::vector<End> ends;
  uint32_t segments = 1;  // segments it touches, the first included
  uint64_t last_end = 0;  // offset just past the last fragment, in the last segment
};

// The layout of a record of `len` bytes starting at `start` in a segment
// whose records end by `capacity` (segment_size - 8). Each stored fragment
// carries `overhead` bytes more than its plain payload (16 for the tag of an
// encrypted record; fragments are never compressed, so their stored size is
// known before they are written).
FragmentPlan plan_fragments(uint64_t len, uint64_t start, uint64_t capacity, uint32_t overhead = 0);

// Segments after the current one that a record of `len` bytes may need,
// wherever it starts: the most plan_fragments() uses when it starts in a
// fresh segment after a session record, which no other start exceeds.
uint32_t fragment_segments_needed(uint64_t len, uint64_t segment_size, uint32_t overhead = 0);

}  // namespace synclog::seg
