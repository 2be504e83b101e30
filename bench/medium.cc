#include "medium.h"

#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

#include <cstdint>
#include <fstream>

namespace bench {
namespace {

struct FsMagic {
  uint64_t magic;
  const char* name;
};

// From <linux/magic.h>; ext2, ext3 and ext4 share one magic.
constexpr FsMagic kFilesystems[] = {
    {0xEF53, "ext4"},     {0x01021994, "tmpfs"},     {0x858458f6, "ramfs"},
    {0x58465342, "xfs"},  {0x9123683E, "btrfs"},     {0xF2F52010, "f2fs"},
    {0x2fc12fc1, "zfs"},  {0x794c7630, "overlayfs"}, {0x6969, "nfs"},
    {0x65735546, "fuse"}, {0x5346544e, "ntfs"},      {0x4d44, "vfat"},
    {0x01021997, "9p"},   {0x62656572, "sysfs"},     {0x73717368, "squashfs"},
};

std::string read_line(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

}  // namespace

std::string MediumInfo::describe() const {
  if (memory) return fs_type + " (memory)";
  std::string s = fs_type + " on " + device;
  std::string extra;
  if (rotational) extra = *rotational ? "rotational" : "non-rotational";
  if (!write_cache.empty()) extra += (extra.empty() ? "" : ", ") + write_cache;
  if (!extra.empty()) s += " (" + extra + ")";
  return s;
}

MediumInfo detect_medium(const std::string& name, const std::filesystem::path& dir) {
  MediumInfo m;
  m.name = name;
  m.dir = dir;
  m.fs_type = "unknown";
  m.device = "unknown";

  struct statfs sfs {};
  if (::statfs(dir.c_str(), &sfs) == 0) {
    const auto magic = static_cast<uint64_t>(sfs.f_type) & 0xffffffffu;
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(magic));
    m.fs_type = hex;
    for (const auto& f : kFilesystems) {
      if (f.magic == magic) m.fs_type = f.name;
    }
    m.memory = m.fs_type == "tmpfs" || m.fs_type == "ramfs";
  }
  if (m.memory) {
    m.device = "none";
    return m;
  }

  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return m;
  // /sys/dev/block/MAJ:MIN links to the partition or disk; a partition's
  // parent directory is its disk, which holds queue/.
  std::error_code ec;
  const std::filesystem::path link =
      "/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  const auto sys = std::filesystem::canonical(link, ec);
  if (ec) return m;
  m.device = sys.filename().string();
  std::filesystem::path queue = sys / "queue";
  if (!std::filesystem::exists(queue, ec)) queue = sys.parent_path() / "queue";
  const std::string rot = read_line(queue / "rotational");
  if (rot == "0" || rot == "1") m.rotational = rot == "1";
  m.write_cache = read_line(queue / "write_cache");
  return m;
}

}  // namespace bench
