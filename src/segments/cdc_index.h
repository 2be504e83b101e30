// The CDC index file of a linked segment (docs/format.md, CDC directory):
// the offset in the segment up to which its records are durable, then
// "COMPLETED" once the segment will never change again. Rewritten whole
// (temp file, fdatasync, rename), so a reader or a crash sees the old
// index or the new one, never a mix, and never more than was durable when
// it was written.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "synclog/error.h"

namespace synclog::seg {

struct CdcIndex {
  uint64_t offset = 0;     // records ending at or before this are durable
  bool completed = false;  // the segment is finished: read it to its end record
};

// "<20-digit id>_cdc.idx", next to the segment's link "<20-digit id>.seg".
std::string cdc_index_name(uint64_t segment_id);
// The text of an index: "<offset>\n", then "COMPLETED\n" if completed.
std::string encode_cdc_index(const CdcIndex& index);
// Nullopt unless `text` is exactly what encode_cdc_index writes.
std::optional<CdcIndex> parse_cdc_index(const std::string& text);

// The index of segment `id` in `cdc_dir`; none if there is no index file.
// A file that does not parse is Errc::bad_directory naming it.
[[nodiscard]] Result<std::optional<CdcIndex>> load_cdc_index(const std::filesystem::path& cdc_dir,
                                                             uint64_t id);
[[nodiscard]] Result<void> store_cdc_index(const std::filesystem::path& cdc_dir, uint64_t id,
                                           const CdcIndex& index, uint32_t perms);

}  // namespace synclog::seg
