#include "segments/segment.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace synclog::seg {

Result<void> Segment::open_image(SegmentKind kind, const SegmentHeader& header, io::Mapping reuse) {
  kind_ = kind;
  const auto mode =
      kind == SegmentKind::direct ? io::File::Mode::direct : io::File::Mode::read_write;
  auto file = io::File::open(path_, mode);
  if (!file) return std::unexpected(file.error());
  Result<io::Mapping> map;
  if (kind == SegmentKind::mmap) {
    map = io::Mapping::map_shared(*file, size_);
  } else if (reuse.bytes().size() == size_) {
    // Zeroes, as fresh memory would be: the bytes past the last record of a
    // sync's final block reach the file, and recovery reads zeros there as
    // the clean end of the log.
    std::ranges::fill(reuse.bytes(), std::byte{0});
    map = std::move(reuse);
  } else {
    map = io::Mapping::map_anonymous(size_);
  }
  if (!map) return std::unexpected(map.error());
  if (kind != SegmentKind::mmap) {
    // Direct writes cover whole blocks, the first one included.
    encode_header(header, map->bytes());
  }
  file_ = std::move(*file);
  mapping_ = std::move(*map);
  return {};
}

io::Mapping Segment::retire() {
  io::Mapping image = std::move(mapping_);  // leaves mapping_ empty
  file_.close();
  if (kind_ == SegmentKind::mmap) return {};
  return image;
}

std::string segment_file_name(uint64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%020llu.seg", static_cast<unsigned long long>(id));
  return buf;
}

bool parse_segment_file_name(const std::string& name, uint64_t* id) {
  if (name.size() != 24 || name.compare(20, 4, ".seg") != 0) return false;
  auto [p, ec] = std::from_chars(name.data(), name.data() + 20, *id);
  return ec == std::errc() && p == name.data() + 20;
}

bool is_temp_file_name(const std::string& name) {
  return name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0 && name[0] >= '0' &&
         name[0] <= '9';
}

}  // namespace synclog::seg
