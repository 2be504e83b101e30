#include "segments/restore_cut.h"

#include <array>
#include <optional>

#include "io/file.h"
#include "segments/batch.h"
#include "segments/format.h"
#include "segments/segment.h"
#include "segments/segment_reader.h"

namespace synclog::seg {
namespace {

std::string time_text(uint64_t ns) { return std::to_string(ns) + " ns"; }

// What the walk has kept so far.
struct Kept {
  Position end;
  uint64_t records = 0;
  std::optional<Position> last;
};

}  // namespace

Result<Cut> find_cut(const std::filesystem::path& dir, const Recovered& rec, const CutRule& rule,
                     Keyring* keys) {
  const Position log_end = rec.report.end;
  if (rule.stop == RestoreStop::position && rule.position >= log_end) {
    return make_error(Errc::invalid_argument,
                      "restore: stop position " + rule.position.to_string() +
                          " is at or past the end of the restorable log (it ends at " +
                          log_end.to_string() + "; restore to the end instead)");
  }
  Kept kept;
  // RestoreStop::time: what the last sync that began at or before the time
  // vouches for (records after it are not known to precede the time).
  std::optional<Kept> confirmed;
  std::optional<Position> confirmed_by;
  std::string stopped;
  std::optional<Position> fragmented;  // a first fragment whose last is still to come
  std::optional<SegmentReader> segment;
  uint32_t version = 0;
  auto take = [&](Position at) {
    return rule.stop != RestoreStop::position || at <= rule.position;
  };
  bool done = false;
  for (const Extent& e : rec.extents) {
    if (done) break;
    if (!segment || segment->id() != e.segment) {
      segment.reset();
      auto opened = SegmentReader::open(dir / segment_file_name(e.segment), e.segment);
      if (!opened) return std::unexpected(opened.error());
      segment = std::move(*opened);
      segment->set_keys(keys);
      auto head = segment->bytes(0, kHeaderSize);
      if (!head) return std::unexpected(head.error());
      auto header = decode_header(*head);
      if (!header) return std::unexpected(header.error());
      version = header->version;
    }
    for (uint32_t off = e.begin; off < e.end && !done;) {
      auto decoded = segment->record(off);
      if (!decoded) return std::unexpected(decoded.error());
      const Decoded& d = *decoded;
      if (d.status != Decode::ok) {
        return make_error(Errc::corruption,
                          "restore: record at " + Position(e.segment, off).to_string() +
                              " no longer decodes (" + (d.reason ? d.reason : "empty") + ")");
      }
      const RecordView& r = d.record;
      const Position at(e.segment, off);
      const Position after(e.segment, off + r.framed);
      switch (r.kind) {
        case Kind::data:
          fragmented.reset();
          if (!take(at)) {
            done = true;
            break;
          }
          kept = Kept{after, kept.records + 1, at};
          break;
        case Kind::batch: {
          fragmented.reset();
          const Position first(e.segment, first_entry(r));
          const Position last(e.segment, last_entry(r));
          if (!take(first)) {
            done = true;
            break;
          }
          if (!take(last)) {
            return make_error(Errc::invalid_argument,
                              "restore: stop position " + rule.position.to_string() +
                                  " is inside the write batch " + first.to_string() + ".." +
                                  last.to_string() +
                                  ", which is restored whole or not at all (stop at " +
                                  last.to_string() + " or before " + first.to_string() + ")");
          }
          kept = Kept{after, kept.records + batch_count(r), last};
          break;
        }
        case Kind::first:
          fragmented = at;
          break;
        case Kind::last:
          if (fragmented) {
            if (!take(*fragmented)) {
              done = true;
              break;
            }
            kept = Kept{after, kept.records + 1, *fragmented};
          }
          fragmented.reset();
          break;
        case Kind::sync: {
          if (rule.stop != RestoreStop::time) break;
          const std::optional<uint64_t> t = r.marker_time(version);
          // Before version 6: no time, vouches for nothing. Time 0: the
          // filler an append leaves when encryption failed after its
          // reservation (appender.cc), not a sync.
          if (!t || *t == 0) break;
          if (*t <= rule.time_ns) {
            confirmed = kept;
            confirmed_by = at;
            break;
          }
          stopped = "the sync marker at " + at.to_string() + " began at " + time_text(*t) +
                    ", after the stop time " + time_text(rule.time_ns);
          done = true;
          break;
        }
        case Kind::session:
        case Kind::loss:
          fragmented.reset();
          break;
        default:
          break;
      }
      if (!done) off += r.framed;
    }
  }
  Cut cut;
  if (rule.stop == RestoreStop::time) {
    if (!confirmed || confirmed->records == 0) {
      return make_error(Errc::invalid_argument,
                        "restore: no record is known to precede the stop time " +
                            time_text(rule.time_ns) +
                            ": no sync marker that began at or before it follows a record" +
                            (stopped.empty() ? std::string(" (segments written before format "
                                                           "version 6 carry no time)")
                                             : " (" + stopped + ")"));
    }
    kept = *confirmed;
    cut.reason = "kept the records before the sync marker at " + confirmed_by->to_string() +
                 ", the last that began at or before " + time_text(rule.time_ns) + "; " +
                 (stopped.empty() ? "no later sync marker carries a time" : stopped);
  } else if (rule.stop == RestoreStop::position) {
    cut.reason = "kept the records at or before " + rule.position.to_string();
  } else {
    cut.reason = "kept every record recovery replays (its replay of the copies ended at " +
                 log_end.to_string() + ")";
  }
  if (kept.records == 0) {
    return make_error(
        Errc::invalid_argument,
        rule.stop == RestoreStop::position
            ? "restore: no record lies at or before the stop position " + rule.position.to_string()
            : std::string("restore: the archive and the live directory hold no "
                          "record to restore"));
  }
  cut.at = kept.end;
  cut.records = kept.records;
  cut.last = kept.last;
  return cut;
}

Result<void> check_crashed_end(const std::filesystem::path& file, Position end) {
  auto reader = SegmentReader::open(file, end.segment());
  if (!reader) return std::unexpected(reader.error());
  auto header = reader->header();
  if (!header) return std::unexpected(header.error());
  const std::string name = file.string();
  if (reader->file_size() < header->segment_size) {
    return make_error(Errc::corruption,
                      "restore: archived segment " + name +
                          " is cut short: " + std::to_string(reader->file_size()) +
                          " bytes where its header says " + std::to_string(header->segment_size) +
                          ", and its records end at " + end.to_string() + " without an end record");
  }
  // Every aligned offset from the end on, as recovery's scan looks.
  for (uint64_t off = end.offset(); off + kRecordHeaderSize <= reader->end();) {
    auto d = reader->frame(static_cast<uint32_t>(off));
    if (!d) return std::unexpected(d.error());
    if (d->status != Decode::ok) {
      off += kAlign;
      continue;
    }
    if (d->record.kind == Kind::end) {
      return make_error(Errc::corruption,
                        "restore: archived segment " + name + " is damaged: its records end at " +
                            end.to_string() + ", before its end record at " +
                            Position(end.segment(), static_cast<uint32_t>(off)).to_string());
    }
    off += d->record.framed;
  }
  return {};
}

Result<void> write_cut(const std::filesystem::path& dir, Position at) {
  auto file = io::File::open(dir / segment_file_name(at.segment()), io::File::Mode::read_write);
  if (!file) return std::unexpected(file.error());
  auto size = file->size();
  if (!size) return std::unexpected(size.error());
  const uint64_t full = std::max<uint64_t>(*size, at.offset() + kRecordHeaderSize);
  // Cut and grown back: the bytes after the cut read as zeros, so no record
  // of the dropped history can validate there later (F2 allows it: same
  // segment id, same offsets).
  if (auto r = file->truncate(at.offset()); !r) return r;
  if (auto r = file->truncate(full); !r) return r;
  std::array<std::byte, kRecordHeaderSize> end{};
  encode_record_at(end.data(), at.segment(), at.offset(), Kind::end, {});
  if (auto r = file->write_at(at.offset(), end); !r) return r;
  return file->sync();
}

}  // namespace synclog::seg
