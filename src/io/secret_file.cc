#include "io/secret_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

#include "io/file.h"

namespace synclog::io {

Result<std::string> read_secret_file(const std::filesystem::path& path) {
  constexpr uint64_t kMaxSize = uint64_t{1} << 20;
  auto file = File::open(path, File::Mode::read_following_links);
  if (!file) return std::unexpected(file.error());
  struct stat st {};
  if (::fstat(file->fd(), &st) != 0) return sys_error("fstat", path, errno);
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return make_error(Errc::invalid_config,
                      "encryption key file " + path.string() + " has mode " + mode +
                          ": it must not be readable or writable by group or others (chmod 600)");
  }
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) > kMaxSize) {
    return make_error(Errc::invalid_config, "encryption key file " + path.string() +
                                                " is not a regular file of at most 1 MiB");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  auto got = file->read_at(0, std::as_writable_bytes(std::span(text.data(), text.size())));
  if (!got) return std::unexpected(got.error());
  text.resize(*got);
  return text;
}

}  // namespace synclog::io
