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

// `attribute` of the device's queue/ in sysfs, 0 if there is none.
uint32_t sysfs_queue_value(dev_t dev, const std::string& attribute) {
  const std::string base =
      "/sys/dev/block/" + std::to_string(major(dev)) + ":" + std::to_string(minor(dev));
  // A partition has no queue/ of its own: its parent directory does.
  for (const char* rel : {"/queue/", "/../queue/"}) {
    std::ifstream f(base + rel + attribute);
    uint32_t size = 0;
    if (f >> size && size > 0) return size;
  }
  return 0;
}

}  // namespace

Result<DirectProbe> probe_direct_io(const std::filesystem::path& file) {
  auto f = File::open(file, File::Mode::direct);
  if (!f) {
    const int err = f.error().sys_errno;
    // open(2): EINVAL is "the filesystem does not support O_DIRECT".
    if (err == EINVAL) {
      return make_error(Errc::unsupported,
                        "the filesystem of " + file.parent_path().string() +
                            " refuses O_DIRECT: " + std::strerror(err),
                        err);
    }
    return make_error(f.error().code, "probing direct I/O: " + f.error().message, err);
  }
  DirectProbe probe{std::move(*f), 0, true};
  struct statx stx;
  std::memset(&stx, 0, sizeof stx);
  if (::statx(probe.file.fd(), "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
      (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align > 0) {
    probe.alignment = stx.stx_dio_offset_align;
  }
  struct stat st;
  if (::fstat(probe.file.fd(), &st) == 0) {
    if (probe.alignment == 0) probe.alignment = sysfs_queue_value(st.st_dev, "logical_block_size");
    probe.physical = sysfs_queue_value(st.st_dev, "physical_block_size");
  }
  if (probe.alignment == 0) {
    probe.alignment = static_cast<uint32_t>(page_size());
    probe.reported = false;
  }
  return probe;
}

}  // namespace synclog::io
