#include "io/links.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "io/file.h"

namespace synclog::io {

Result<void> link_file(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (::link(from.c_str(), to.c_str()) != 0)
    return sys_error("link to " + to.string(), from, errno);
  return {};
}

Result<uint64_t> link_count(const std::filesystem::path& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return uint64_t{0};
    return sys_error("lstat", path, errno);
  }
  return static_cast<uint64_t>(st.st_nlink);
}

Result<uint64_t> dir_file_bytes(const std::filesystem::path& dir) {
  auto names = list_dir(dir);
  if (!names) return std::unexpected(names.error());
  uint64_t total = 0;
  for (const auto& name : *names) {
    struct stat st;
    const auto path = dir / name;
    if (::lstat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) continue;
      return sys_error("lstat", path, errno);
    }
    if (S_ISREG(st.st_mode)) total += static_cast<uint64_t>(st.st_size);
  }
  return total;
}

Result<bool> same_or_inside(const std::filesystem::path& inner,
                            const std::filesystem::path& outer) {
  std::error_code ec;
  const auto in = std::filesystem::canonical(inner, ec);
  if (ec) return sys_error("resolve", inner, ec.value());
  const auto out = std::filesystem::canonical(outer, ec);
  if (ec) return sys_error("resolve", outer, ec.value());
  auto o = out.begin();
  auto i = in.begin();
  for (; o != out.end(); ++o, ++i) {
    if (i == in.end() || *i != *o) return false;
  }
  return true;
}

}  // namespace synclog::io
