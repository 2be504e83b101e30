#include "record_walk.h"

#include <cstdint>

#include "dir_scan.h"
#include "segments/segment.h"
#include "segments/segment_reader.h"

namespace synclog::dump {

Result<void> walk_records(const std::filesystem::path& dir, const seg::Recovered& rec,
                          const Range& range, const RecordVisitor& visit) {
  std::optional<seg::SegmentReader> segment;  // the file of the current extent
  for (const auto& e : rec.extents) {
    if (range.to && Position(e.segment, e.begin) >= *range.to) break;
    if (range.from && e.end != UINT32_MAX && Position(e.segment, e.end) <= *range.from) continue;
    if (!segment || segment->id() != e.segment) {
      segment.reset();
      auto opened = seg::SegmentReader::open(dir / seg::segment_file_name(e.segment), e.segment);
      if (!opened) return std::unexpected(opened.error());
      segment = std::move(*opened);
    }
    uint32_t off = e.begin;
    // Deep inside a segment, --from starts at its record when a record
    // starts there (its checksum names the offset, F2), as Log::read does.
    if (range.from && range.from->segment() == e.segment && range.from->offset() > e.begin &&
        range.from->offset() < e.end) {
      auto d = segment->record(range.from->offset());
      if (!d) return std::unexpected(d.error());
      if (d->status == seg::Decode::ok) off = range.from->offset();
    }
    while (off < e.end) {
      auto decoded = segment->record(off);
      if (!decoded) return std::unexpected(decoded.error());
      const seg::Decoded& d = *decoded;
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
