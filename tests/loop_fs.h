// A real filesystem of a given type on a loop device, mounted on a fresh
// directory for the lifetime of the object: for behaviour that depends on
// the filesystem or the device (sector size, copy-on-write). Needs root,
// /dev/loop-control and the mkfs tool; skip_reason() says which is missing.
#pragma once

#include <filesystem>
#include <string>

#include "test_util.h"

namespace synclog::test {

class LoopFs {
 public:
  // `mkfs` is the command without the device, e.g. "mkfs.ext4 -q -F";
  // `sector_size` the loop device's logical sector size.
  LoopFs(const std::string& mkfs, uint32_t sector_size, uint64_t image_size = 320ull << 20);
  ~LoopFs();
  LoopFs(const LoopFs&) = delete;
  LoopFs& operator=(const LoopFs&) = delete;

  const std::string& skip_reason() const { return skip_; }
  const std::filesystem::path& mount() const { return mount_.path(); }
  // An empty directory on it for a log (the root holds lost+found on ext4).
  std::filesystem::path log_dir() const { return mount_.path() / "log"; }
  // The loop device, e.g. /dev/loop3.
  std::filesystem::path device() const { return device_; }

 private:
  TempDir image_dir_;
  TempDir mount_;
  std::string device_;
  bool mounted_ = false;
  std::string skip_;
};

}  // namespace synclog::test
