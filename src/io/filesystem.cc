#include "io/filesystem.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <unistd.h>

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
    {0xca451a4e, "bcachefs", false},
    {CEPH_SUPER_MAGIC, "ceph", false},
};

// XFS_IOC_FSGEOMETRY_V4 and its reflink flag, from xfs_fs.h (xfslibs-dev,
// not needed just for this): the layout up to logsunit is stable since the
// ioctl's v4.
struct XfsGeometryV4 {
  uint32_t blocksize, rtextsize, agblocks, agcount, logblocks, sectsize, inodesize, imaxpct;
  uint64_t datablocks, rtblocks, rtextents, logstart;
  unsigned char uuid[16];
  uint32_t sunit, swidth;
  int32_t version;
  uint32_t flags, logsectsize, rtsectsize, dirblocksize, logsunit;
};
static_assert(sizeof(XfsGeometryV4) == 112);
constexpr unsigned long kXfsIocFsGeometryV4 = _IOR('X', 124, XfsGeometryV4);
constexpr uint32_t kXfsGeomFlagsReflink = 1u << 20;

Result<bool> xfs_reflink(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return sys_error("open directory", dir, errno);
  XfsGeometryV4 geo{};
  const int rc = ::ioctl(fd, kXfsIocFsGeometryV4, &geo);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return sys_error("XFS_IOC_FSGEOMETRY on", dir, err);
  return (geo.flags & kXfsGeomFlagsReflink) != 0;
}

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
      fs.memory = fs.magic == TMPFS_MAGIC || fs.magic == RAMFS_MAGIC;
      if (fs.magic == BTRFS_SUPER_MAGIC || fs.magic == 0x2fc12fc1 || fs.magic == 0xca451a4e) {
        fs.copy_on_write = std::string(k.name) + " is copy-on-write";
      } else if (fs.magic == XFS_SUPER_MAGIC) {
        auto reflink = xfs_reflink(dir);
        if (!reflink) return std::unexpected(reflink.error());
        // Unshared extents are overwritten in place, but one reflinked
        // copy (cp --reflink, a snapshot tool) makes the next store CoW.
        if (*reflink)
          fs.copy_on_write = "xfs has reflink enabled (shared extents are copy-on-write)";
      }
      return fs;
    }
  }
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(fs.magic));
  fs.name = std::string("filesystem type ") + hex;
  return fs;
}

}  // namespace synclog::io
