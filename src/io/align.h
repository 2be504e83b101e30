// Direct I/O alignment: queried, never assumed (Seastar's
// disk_write_dma_alignment). The kernel may accept a misaligned O_DIRECT
// write on some filesystems and fail it on others, so the library aligns
// every direct write to what this returns.
#pragma once

#include <cstdint>
#include <filesystem>

#include "io/file.h"
#include "synclog/error.h"

namespace synclog::io {

struct DirectProbe {
  File file;  // `file` opened O_DIRECT, for a probe write
  // The file-offset and length alignment for O_DIRECT writes on its
  // filesystem: statx(STATX_DIOALIGN) where the filesystem reports it, else
  // the device's logical block size from sysfs, else the page size.
  uint32_t alignment = 0;
  // False when `alignment` is the page-size guess: nothing reported it.
  bool reported = false;
  // The device's physical block size from sysfs, 0 if there is no block
  // device (tmpfs, FUSE, NFS). On 512e drives (512 logical, 4096 physical)
  // it is larger than `alignment`.
  uint32_t physical = 0;
};

// The block every direct write covers and a padded sync ends on: the
// configured size if any; else the alignment, raised to the physical block
// size (at most 4096) so that no sync makes the drive read-modify-write a
// physical sector that holds acknowledged data.
constexpr uint32_t choose_block_size(uint32_t configured, uint32_t alignment, uint32_t physical) {
  if (configured != 0) return configured;
  const bool usable = physical > alignment && physical <= 4096 && (physical & (physical - 1)) == 0;
  return usable ? physical : alignment;
}

// Opens an existing file with O_DIRECT and finds the alignment. An existing
// file (the log's lock file), not a fresh one: a probe file created and
// unlinked can outlive its unlink on some filesystems (FUSE keeps it as
// .fuse_hidden* until the daemon has processed the close), where the
// directory scan of the same open finds it. Errc::unsupported if the
// filesystem refuses O_DIRECT (EINVAL); any other failure is the open's own
// error (EIO is Errc::io_error).
[[nodiscard]] Result<DirectProbe> probe_direct_io(const std::filesystem::path& file);

}  // namespace synclog::io
