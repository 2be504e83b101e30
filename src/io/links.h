// Hard links and directory usage, for change data capture: the log links
// its segment files into a second directory that a consumer in another
// process reads and empties.
#pragma once

#include <cstdint>
#include <filesystem>

#include "synclog/error.h"

namespace synclog::io {

// link(2): `to` becomes a second name of `from`. EXDEV (another filesystem
// or mount) and EEXIST keep their errno.
[[nodiscard]] Result<void> link_file(const std::filesystem::path& from,
                                     const std::filesystem::path& to);
// How many names the file at `path` has (lstat st_nlink); 0 if it has none.
[[nodiscard]] Result<uint64_t> link_count(const std::filesystem::path& path);
// The sizes of the regular files directly in `dir`, added up. A file that
// disappears while it is counted (a consumer deleting it) counts nothing.
[[nodiscard]] Result<uint64_t> dir_file_bytes(const std::filesystem::path& dir);
// Whether `inner` is `outer` itself or lies inside it, both resolved
// (symbolic links, "..") first. Both must exist.
[[nodiscard]] Result<bool> same_or_inside(const std::filesystem::path& inner,
                                          const std::filesystem::path& outer);

}  // namespace synclog::io
