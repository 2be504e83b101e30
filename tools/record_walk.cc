#include "record_walk.h"

#include <cstdint>

#include "dir_scan.h"
#include "segments/segment.h"

namespace synclog::dump {

Result<void> walk_records(const std::filesystem::path& dir, const seg::Recovered& rec,
                          const Range& range, const RecordVisitor& visit) {
  Bytes buf;  // the segment file of the current extent
  std::optional<uint64_t> loaded;
  for (const auto& e : rec.extents) {
    if (range.to && Position(e.segment, e.begin) >= *range.to) break;
    if (range.from && e.end != UINT32_MAX && Position(e.segment, e.end) <= *range.from) continue;
    if (loaded != e.segment) {
      auto file = read_whole_file(dir / seg::segment_file_name(e.segment));
      if (!file) return std::unexpected(file.error());
      buf = std::move(*file);
      loaded = e.segment;
    }
    for (uint32_t off = e.begin; off < e.end;) {
      const seg::Decoded d = seg::decode_record(buf, e.segment, off);
      if (d.status != seg::Decode::ok) break;  // only for an open extent (UINT32_MAX)
      const Position at(e.segment, off);
      off += d.record.framed;
      if (range.from && at < *range.from) continue;
      if (range.to && at >= *range.to) return {};
      if (!visit(at, d.record)) return {};
    }
  }
  return {};
}

}  // namespace synclog::dump
