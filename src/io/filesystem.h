// Which filesystem a directory is on (statfs f_type), and what the library
// may trust it to do. Kept to what the kernel source shows, not to what a
// filesystem advertises.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "synclog/error.h"

namespace synclog::io {

struct Filesystem {
  uint64_t magic = 0;  // statfs f_type
  std::string name;    // "ext4", "fuse", ... or "filesystem type 0x..." if unknown here
  // An O_DIRECT write submitted through io_uring or libaio with RWF_DSYNC
  // completes only once its data is durable (docs/backends.md says which
  // filesystems and why).
  bool async_dsync_honoured = false;
  // Overwrites can need new blocks (copy-on-write: btrfs, bcachefs, ZFS,
  // XFS with reflink), so fallocate guarantees no space for them; empty if
  // not, else what makes it so.
  std::string copy_on_write;
  // No device below the page cache (tmpfs, ramfs): a sync costs no I/O, so
  // backends rank differently here than on a disk (docs/backends.md).
  bool memory = false;
};

[[nodiscard]] Result<Filesystem> probe_filesystem(const std::filesystem::path& dir);

}  // namespace synclog::io
