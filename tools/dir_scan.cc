#include "dir_scan.h"

#include <algorithm>
#include <map>
#include <span>

#include "io/file.h"
#include "segments/segment.h"

namespace synclog::dump {

Result<Bytes> read_whole_file(const std::filesystem::path& path) {
  auto file = io::File::open(path, io::File::Mode::read);
  if (!file) return std::unexpected(file.error());
  auto size = file->size();
  if (!size) return std::unexpected(size.error());
  Bytes buf(*size);
  size_t have = 0;
  while (have < buf.size()) {
    auto n = file->read_at(have, std::span(buf).subspan(have));
    if (!n) return std::unexpected(n.error());
    if (*n == 0) break;  // shrunk while we read: keep what is there
    have += *n;
  }
  buf.resize(have);
  return buf;
}

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

FileScan scan_file(const std::filesystem::path& dir, uint64_t id, const std::string& name) {
  FileScan f;
  f.id = id;
  f.name = name;
  auto buf = read_whole_file(dir / name);
  if (!buf) {
    f.end = EndKind::bad_header;
    f.header_error = buf.error().message;
    return f;
  }
  f.file_size = buf->size();
  auto header = seg::decode_header(*buf);
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
    const seg::Decoded d = seg::decode_record(*buf, id, off);
    if (d.status == seg::Decode::ok) {
      if (d.record.kind == seg::Kind::end) {
        f.end = EndKind::end_record;
        off += d.record.framed;
        break;
      }
      if (d.record.kind == seg::Kind::data) {
        ++f.records;
        if (!f.first_data) f.first_data = off;
        f.last_data = off;
      }
      off += d.record.framed;
      continue;
    }
    const auto rest = std::span<const std::byte>(*buf).subspan(std::min<size_t>(off, buf->size()));
    if (d.status == seg::Decode::empty && all_zero(rest)) {
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

Result<DirScan> scan_dir(const std::filesystem::path& dir) {
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
    } else if (n == "lost+found" && io::is_real_dir(dir / n).value_or(false)) {
      continue;  // fsck's, at the root of a filesystem: Log::open accepts it too
    } else {
      out.foreign.push_back(n);
    }
  }
  for (const auto& [id, n] : ids) out.segments.push_back(scan_file(dir, id, n));
  return out;
}

}  // namespace synclog::dump
