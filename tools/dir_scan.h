// The files of a log directory, each segment walked on its own (no
// cross-segment rules: that is recovery's job). For `list` and `config`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "segments/format.h"
#include "segments/transform.h"
#include "synclog/error.h"

namespace synclog::dump {

enum class EndKind { end_record, clean, torn, bad_header };

struct FileScan {
  uint64_t id = 0;
  std::string name;
  uint64_t file_size = 0;
  std::optional<seg::SegmentHeader> header;
  std::string header_error;
  uint64_t records = 0;  // data records
  std::optional<uint32_t> first_data, last_data;
  uint32_t stop = 0;  // where the walk from the header stopped (past the end record if any)
  EndKind end = EndKind::clean;
  std::string why;  // for a torn stop: the decoder's reason
};

const char* end_name(EndKind e);

struct DirScan {
  std::vector<FileScan> segments;  // by id
  std::vector<std::string> temp_files;
  std::vector<std::string> foreign;
  bool lock = false;
};

// `keys` decrypts encrypted records (null: they are counted sealed).
[[nodiscard]] Result<DirScan> scan_dir(const std::filesystem::path& dir,
                                       seg::Keyring* keys = nullptr);

}  // namespace synclog::dump
