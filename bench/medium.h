// What a benchmark directory sits on: filesystem type (statfs magic), the
// block device behind it and whether the kernel calls it rotational, and
// whether it is memory (tmpfs, ramfs). Detection never fails: unknown parts
// read "unknown".
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace bench {

struct MediumInfo {
  std::string name;                // the label given on the command line ("disk", "ram")
  std::filesystem::path dir;       // the directory given
  std::string fs_type;             // "ext4", "tmpfs", "xfs"... or "0x<magic>"
  std::string device;              // "vda", "nvme0n1p1"... or "none" (tmpfs) or "unknown"
  std::optional<bool> rotational;  // from /sys/block/<disk>/queue/rotational
  std::string write_cache;         // "write back" / "write through" / "" when unknown
  bool memory = false;             // tmpfs or ramfs: no device behind it

  // "ext4 on vda (rotational, write back)" or "tmpfs (memory)".
  std::string describe() const;
};

// Inspects `dir` (which must exist).
MediumInfo detect_medium(const std::string& name, const std::filesystem::path& dir);

}  // namespace bench
