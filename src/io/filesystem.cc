#include "io/filesystem.h"

#include <linux/magic.h>
#include <sys/statfs.h>

#include <cerrno>
#include <cstdio>

#include "io/file.h"

namespace synclog::io {
namespace {

struct Known {
  uint64_t magic;
  const char* name;
  bool async_dsync_honoured;
};

// Honoured: ext4, XFS and btrfs do direct I/O through iomap, whose
// completion runs generic_write_sync (or writes with FUA) before the write is
// reported complete, for io_uring and libaio alike. tmpfs has no device and
// no cache below the page cache: a completed write is as durable as it will
// ever be. Everything else falls back: FUSE completes an async direct write
// with RWF_DSYNC without sending the daemon a flush, and for network and
// stacked filesystems nobody has shown what happens.
constexpr Known kKnown[] = {
    {EXT4_SUPER_MAGIC, "ext4", true},  // also ext2 and ext3 (same magic)
    {XFS_SUPER_MAGIC, "xfs", true},
    {BTRFS_SUPER_MAGIC, "btrfs", true},
    {TMPFS_MAGIC, "tmpfs", true},
    {FUSE_SUPER_MAGIC, "fuse", false},
    {NFS_SUPER_MAGIC, "nfs", false},
    {OVERLAYFS_SUPER_MAGIC, "overlayfs", false},
    {F2FS_SUPER_MAGIC, "f2fs", false},
    {0xfe534d42, "smb", false},  // SMB2_MAGIC_NUMBER, not in <linux/magic.h>
    {CIFS_SUPER_MAGIC, "cifs", false},
    {V9FS_MAGIC, "9p", false},
    {RAMFS_MAGIC, "ramfs", false},
    {0x2fc12fc1, "zfs", false},
    {CEPH_SUPER_MAGIC, "ceph", false},
};

}  // namespace

Result<Filesystem> probe_filesystem(const std::filesystem::path& dir) {
  struct statfs st;
  if (::statfs(dir.c_str(), &st) != 0) return sys_error("statfs", dir, errno);
  Filesystem fs;
  fs.magic = static_cast<uint64_t>(static_cast<uint32_t>(st.f_type));
  for (const Known& k : kKnown) {
    if (k.magic == fs.magic) {
      fs.name = k.name;
      fs.async_dsync_honoured = k.async_dsync_honoured;
      return fs;
    }
  }
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(fs.magic));
  fs.name = std::string("filesystem type ") + hex;
  return fs;
}

}  // namespace synclog::io
