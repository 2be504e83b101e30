// Direct I/O alignment: queried, never assumed (Seastar's
// disk_write_dma_alignment). The kernel may accept a misaligned O_DIRECT
// write on some filesystems and fail it on others, so the library aligns
// every direct write to what this returns.
#pragma once

#include <cstdint>
#include <filesystem>

#include "synclog/error.h"

namespace synclog::io {

// The file-offset and length alignment for O_DIRECT writes into files in
// `dir`: statx(STATX_DIOALIGN) where the filesystem reports it, else the
// device's logical block size from sysfs, else the page size. Fails with
// Errc::unsupported if the filesystem refuses O_DIRECT.
[[nodiscard]] Result<uint32_t> probe_direct_alignment(const std::filesystem::path& dir);

}  // namespace synclog::io
