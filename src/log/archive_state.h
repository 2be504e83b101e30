// The archiver's record of progress: the log it belongs to and the highest
// segment id archived. Segments are archived in id order, so one id says
// which are done. Rewritten whole (temp file, fdatasync, rename, directory
// fsync), so a crash leaves the old state or the new, never a mix.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "synclog/error.h"

namespace synclog {

struct ArchiveState {
  uint64_t log_id = 0;
  uint64_t through = 0;  // every segment of this log up to this id is archived
};

// The state in `dir`, or none if there is no state file. A file that does
// not parse is Errc::bad_directory naming it: guessing could release a
// segment that was never archived.
[[nodiscard]] Result<std::optional<ArchiveState>> load_archive_state(
    const std::filesystem::path& dir);
[[nodiscard]] Result<void> store_archive_state(const std::filesystem::path& dir,
                                               const ArchiveState& state, uint32_t perms);

}  // namespace synclog
