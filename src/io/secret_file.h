// Reads a small file that holds secrets (the encryption key file): only if
// no one but its owner may read or write it, so a key is never taken from a
// file that has already leaked it.
#pragma once

#include <filesystem>
#include <string>

#include "synclog/error.h"

namespace synclog::io {

// The file's contents. Fails with Errc::invalid_config if its mode grants
// any permission to group or others, or if it is larger than 1 MiB; with
// Errc::io_error (errno kept) if it cannot be read. Follows symbolic links
// (secret stores often hand out links), checking the file they lead to.
[[nodiscard]] Result<std::string> read_secret_file(const std::filesystem::path& path);

}  // namespace synclog::io
