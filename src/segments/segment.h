// A segment of this session: its file, its memory image and the reservation
// word appenders share. The control block outlives the file: a writer that
// read a stale "active segment" pointer may still fetch_add on `reserved`,
// which by then is past capacity, so it never touches the image.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>

#include "io/file.h"
#include "io/mapping.h"
#include "segments/format.h"
#include "segments/transform.h"
#include "synclog/config.h"
#include "synclog/error.h"

namespace synclog::seg {

class Segment {
 public:
  Segment(uint64_t id, uint64_t size, std::filesystem::path path)
      : id_(id), size_(size), path_(std::move(path)) {}

  uint64_t id() const { return id_; }
  uint64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }
  // Records must end at or before capacity(), leaving room for the end record.
  uint64_t capacity() const { return size_ - kRecordHeaderSize; }

  // Opens the file and builds the memory image: a shared mapping of the file
  // (mmap), or private zeroed memory holding a copy of the header (direct:
  // the file is opened O_DIRECT; buffered: plainly). `reuse`, an image of
  // an earlier segment of the same size, is zeroed and used instead of new
  // memory (direct and buffered only).
  [[nodiscard]] Result<void> open_image(SegmentKind kind, const SegmentHeader& header,
                                        io::Mapping reuse = {});
  // Lets go of the file and the image; the control block stays valid.
  // Returns a direct or buffered segment's image, for reuse.
  io::Mapping retire();

  std::span<std::byte> image() const { return mapping_.bytes(); }
  const io::Mapping& mapping() const { return mapping_; }
  const io::File& file() const { return file_; }
  SegmentKind kind() const { return kind_; }
  // The key and salt its header names, if its records are encrypted. Set
  // before any writer sees the segment.
  const SegmentCipher* cipher() const { return cipher_ ? &*cipher_ : nullptr; }
  void set_cipher(const SegmentCipher& c) { cipher_ = c; }

  // Next free offset. fetch_add by appenders; values past capacity() mean the
  // segment is full and the one writer that crossed it wrote the end record.
  std::atomic<uint64_t> reserved{kHeaderSize};
  // Offset just past the end record, once written; 0 while the segment is open.
  std::atomic<uint64_t> sealed_end{0};

 private:
  uint64_t id_;
  uint64_t size_;
  std::filesystem::path path_;
  SegmentKind kind_ = SegmentKind::mmap;
  io::File file_;
  io::Mapping mapping_;
  std::optional<SegmentCipher> cipher_;
};

// "00000000000000000042.seg": the id names the file (F1).
std::string segment_file_name(uint64_t id);
// Parses a segment file name; false for anything else.
bool parse_segment_file_name(const std::string& name, uint64_t* id);
// Temporary files (spares being made, segments being recycled) end in ".tmp".
bool is_temp_file_name(const std::string& name);
inline constexpr const char* kLockFileName = "LOCK";
// Which segments were archived (docs/durability.md, Archiving), and the
// file that replaces it by rename. Neither is part of the log's records.
inline constexpr const char* kArchiveStateName = "ARCHIVED";
inline constexpr const char* kArchiveStateTemp = "ARCHIVED.new";

}  // namespace synclog::seg
