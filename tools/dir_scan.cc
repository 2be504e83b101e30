#include "dir_scan.h"

#include <algorithm>
#include <map>
#include <span>

#include "io/file.h"
#include "segments/batch.h"
#include "segments/segment.h"
#include "segments/segment_reader.h"

namespace synclog::dump {

const char* end_name(EndKind e) {
  switch (e) {
    case EndKind::end_record:
      return "end record";
    case EndKind::clean:
      return "clean";
    case EndKind::torn:
      return "torn";
    case EndKind::bad_header:
      break;
  }
  return "bad header";
}

namespace {

bool all_zero(std::span<const std::byte> b) {
  return std::all_of(b.begin(), b.end(), [](std::byte x) { return x == std::byte{0}; });
}

// Whether every byte from `from` to the end is zero, a window at a time.
Result<bool> zero_from(seg::SegmentReader& segment, uint64_t from) {
  for (uint64_t off = from; off < segment.end();) {
    auto chunk = segment.bytes(off, seg::SegmentReader::kWindow);
    if (!chunk) return std::unexpected(chunk.error());
    if (chunk->empty()) break;
    if (!all_zero(*chunk)) return false;
    off += chunk->size();
  }
  return true;
}

FileScan unreadable(FileScan f, const Error& e) {
  f.end = EndKind::bad_header;
  f.header_error = e.message;
  return f;
}

FileScan scan_file(const std::filesystem::path& dir, uint64_t id, const std::string& name,
                   seg::Keyring* keys) {
  FileScan f;
  f.id = id;
  f.name = name;
  auto segment = seg::SegmentReader::open(dir / name, id);
  if (!segment) return unreadable(std::move(f), segment.error());
  segment->set_keys(keys);
  segment->set_sealed_ok(keys == nullptr);
  f.file_size = segment->file_size();
  auto head = segment->bytes(0, seg::kHeaderSize);
  if (!head) return unreadable(std::move(f), head.error());
  auto header = seg::decode_header(*head);
  if (!header) {
    f.end = EndKind::bad_header;
    f.header_error = header.error().message;
    return f;
  }
  f.header = *header;
  if (header->segment_id != id) {
    f.end = EndKind::bad_header;
    f.header_error = "header names segment " + std::to_string(header->segment_id);
    return f;
  }
  uint32_t off = seg::kHeaderSize;
  for (;;) {
    auto decoded = segment->record(off);
    if (!decoded) return unreadable(std::move(f), decoded.error());
    const seg::Decoded d = *decoded;
    if (d.status == seg::Decode::ok) {
      if (d.record.kind == seg::Kind::end) {
        f.end = EndKind::end_record;
        off += d.record.framed;
        break;
      }
      // A record in fragments counts where it starts, as replay returns it.
      if (d.record.kind == seg::Kind::data || d.record.kind == seg::Kind::first) {
        ++f.records;
        if (!f.first_data) f.first_data = off;
        f.last_data = off;
      }
      if (d.record.kind == seg::Kind::batch && !d.record.sealed) {
        f.records += seg::batch_count(d.record);
        if (!f.first_data) f.first_data = seg::first_entry(d.record);
        f.last_data = seg::last_entry(d.record);
      }
      off += d.record.framed;
      continue;
    }
    bool clean = false;
    if (d.status == seg::Decode::empty) {
      auto zero = zero_from(*segment, off);
      if (!zero) return unreadable(std::move(f), zero.error());
      clean = *zero;
    }
    if (clean) {
      f.end = EndKind::clean;
    } else {
      f.end = EndKind::torn;
      f.why =
          d.status == seg::Decode::empty ? "unwritten slot followed by written bytes" : d.reason;
    }
    break;
  }
  f.stop = off;
  return f;
}

}  // namespace

Result<DirScan> scan_dir(const std::filesystem::path& dir, seg::Keyring* keys) {
  auto names = io::list_dir(dir);
  if (!names) return std::unexpected(names.error());
  std::sort(names->begin(), names->end());
  DirScan out;
  std::map<uint64_t, std::string> ids;
  for (const auto& n : *names) {
    uint64_t id = 0;
    if (seg::parse_segment_file_name(n, &id)) {
      ids[id] = n;
    } else if (seg::is_temp_file_name(n)) {
      out.temp_files.push_back(n);
    } else if (n == seg::kLockFileName) {
      out.lock = true;
    } else if (n == seg::kArchiveStateName || n == seg::kArchiveStateTemp) {
      continue;  // the archiver's state (Log::open accepts it too)
    } else if (n == "lost+found" && io::is_real_dir(dir / n).value_or(false)) {
      continue;  // fsck's, at the root of a filesystem: Log::open accepts it too
    } else {
      out.foreign.push_back(n);
    }
  }
  for (const auto& [id, n] : ids) out.segments.push_back(scan_file(dir, id, n, keys));
  return out;
}

}  // namespace synclog::dump
