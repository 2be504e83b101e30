// A scratch directory in /dev/shm for one test or micro-benchmark, made
// empty on construction and removed on destruction.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace bench {

class ScratchDir {
 public:
  // /dev/shm/<prefix>-<pid>-<n>: unique within the process as well.
  explicit ScratchDir(const std::string& prefix) {
    static int n = 0;
    path_ = "/dev/shm/" + prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace bench
