#include "record_walk.h"

#include <cstdint>

#include "dir_scan.h"
#include "segments/batch.h"
#include "segments/segment.h"
#include "segments/segment_reader.h"

namespace synclog::dump {

Result<void> walk_records(const std::filesystem::path& dir, const seg::Recovered& rec,
                          const Range& range, const RecordVisitor& visit, seg::Keyring* keys,
                          uint32_t* version) {
  std::optional<seg::SegmentReader> segment;  // the file of the current extent
  for (const auto& e : rec.extents) {
    if (range.to && Position(e.segment, e.begin) >= *range.to) break;
    if (range.from && e.end != UINT32_MAX && Position(e.segment, e.end) <= *range.from) continue;
    if (!segment || segment->id() != e.segment) {
      segment.reset();
      auto opened = seg::SegmentReader::open(dir / seg::segment_file_name(e.segment), e.segment);
      if (!opened) return std::unexpected(opened.error());
      segment = std::move(*opened);
      if (version) {
        auto head = segment->bytes(0, seg::kHeaderSize);
        if (!head) return std::unexpected(head.error());
        auto header = seg::decode_header(*head);
        *version = header ? header->version : 0;
      }
      segment->set_keys(keys);
      segment->set_sealed_ok(keys == nullptr);
    }
    uint32_t off = e.begin;
    // Deep inside a segment, --from starts at its record when a record
    // starts there (its checksum names the offset, F2), or at the batch
    // holding it, as Log::read does.
    if (range.from && range.from->segment() == e.segment && range.from->offset() > e.begin &&
        range.from->offset() < e.end) {
      auto start = seg::start_of(*segment, e.begin, range.from->offset());
      if (!start) return std::unexpected(start.error());
      if (*start) off = **start;
    }
    while (off < e.end) {
      auto decoded = segment->record(off);
      if (!decoded) return std::unexpected(decoded.error());
      const seg::Decoded& d = *decoded;
      if (d.status != seg::Decode::ok) break;  // only for an open extent (UINT32_MAX)
      const Position at(e.segment, off);
      off += d.record.framed;
      // False once the walk is to stop (past range.to, or the visitor said so).
      auto offer = [&](Position p, const seg::RecordView& r) {
        if (range.from && p < *range.from) return true;
        if (range.to && p >= *range.to) return false;
        return visit(p, r);
      };
      if (d.record.kind != seg::Kind::batch || d.record.sealed) {
        if (!offer(at, d.record)) return {};
        continue;
      }
      const seg::RecordView& batch = d.record;
      seg::RecordView head = batch;
      head.payload = batch.payload.first(seg::kBatchHeader);
      head.framed = seg::kRecordHeaderSize + seg::kBatchHeader;
      if (!offer(at, head)) return {};
      for (auto r = seg::first_inner(batch); r; r = seg::next_inner(batch, *r)) {
        if (!offer(Position(e.segment, r->offset),
                   {seg::Kind::data, r->offset, r->framed, r->data}))
          return {};
      }
    }
  }
  return {};
}

}  // namespace synclog::dump
