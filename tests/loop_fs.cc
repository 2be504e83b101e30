#include "loop_fs.h"

#include <sys/mount.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>

namespace synclog::test {
namespace {

// Runs a shell command; its output (both streams) and exit status.
std::pair<int, std::string> run(const std::string& command) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, std::strerror(errno)};
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  return {::pclose(p), out};
}

}  // namespace

LoopFs::LoopFs(const std::string& mkfs, uint32_t sector_size, uint64_t image_size)
    : image_dir_("/dev/shm"), mount_("/tmp") {
  if (::geteuid() != 0) {
    skip_ = "loop devices and mounts need root";
    return;
  }
  if (::access("/dev/loop-control", R_OK | W_OK) != 0) {
    skip_ = std::string("/dev/loop-control is not usable: ") + std::strerror(errno);
    return;
  }
  const std::string tool = mkfs.substr(0, mkfs.find(' '));
  if (run("command -v " + tool).first != 0) {
    skip_ = tool + " is not installed";
    return;
  }
  const auto image = image_dir_.path() / "fs.img";
  std::ofstream(image).close();
  std::filesystem::resize_file(image, image_size);  // sparse
  auto [rc, out] = run("losetup --find --show --sector-size " + std::to_string(sector_size) + " " +
                       image.string());
  if (rc != 0) {
    skip_ = "losetup failed: " + out;
    return;
  }
  device_ = out.substr(0, out.find('\n'));
  if (auto [mrc, mout] = run(mkfs + " " + device_); mrc != 0) {
    skip_ = mkfs + " failed: " + mout;
    return;
  }
  if (auto [mrc, mout] = run("mount " + device_ + " " + mount_.path().string()); mrc != 0) {
    skip_ = "mount failed: " + mout;
    return;
  }
  mounted_ = true;
  std::filesystem::create_directory(log_dir());
}

LoopFs::~LoopFs() {
  if (mounted_ && ::umount2(mount_.path().c_str(), 0) != 0)
    (void)::umount2(mount_.path().c_str(), MNT_DETACH);
  if (!device_.empty()) (void)run("losetup -d " + device_);
}

}  // namespace synclog::test
