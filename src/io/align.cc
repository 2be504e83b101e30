#include "io/align.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "io/mapping.h"

namespace synclog::io {
namespace {

uint32_t sysfs_logical_block_size(dev_t dev) {
  const std::string base =
      "/sys/dev/block/" + std::to_string(major(dev)) + ":" + std::to_string(minor(dev));
  // A partition has no queue/ of its own: its parent directory does.
  for (const char* rel : {"/queue/logical_block_size", "/../queue/logical_block_size"}) {
    std::ifstream f(base + rel);
    uint32_t size = 0;
    if (f >> size && size > 0) return size;
  }
  return 0;
}

}  // namespace

Result<uint32_t> probe_direct_alignment(const std::filesystem::path& dir) {
  // A temp-file name, so a crash that leaves it behind costs nothing: the
  // next open removes it like any other .tmp file.
  const auto probe = dir / "0.direct-probe.tmp";
  int fd = ::open(probe.c_str(), O_CREAT | O_RDWR | O_DIRECT | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    return make_error(
        Errc::unsupported,
        "the filesystem of " + dir.string() + " refuses O_DIRECT: " + std::strerror(err), err);
  }
  struct statx stx;
  std::memset(&stx, 0, sizeof stx);
  uint32_t align = 0;
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
      (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align > 0) {
    align = stx.stx_dio_offset_align;
  }
  struct stat st;
  if (align == 0 && ::fstat(fd, &st) == 0) align = sysfs_logical_block_size(st.st_dev);
  ::close(fd);
  ::unlink(probe.c_str());
  if (align == 0) align = static_cast<uint32_t>(page_size());
  return align;
}

}  // namespace synclog::io
