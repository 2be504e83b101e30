#include "log/archive_state.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "io/file.h"
#include "segments/segment.h"

namespace synclog {
namespace {

constexpr size_t kMaxStateBytes = 256;

std::string encode(const ArchiveState& s) {
  char buf[kMaxStateBytes];
  std::snprintf(buf, sizeof buf, "synclog-archived 1\nlog_id %016" PRIx64 "\nthrough %" PRIu64 "\n",
                s.log_id, s.through);
  return buf;
}

}  // namespace

Result<std::optional<ArchiveState>> load_archive_state(const std::filesystem::path& dir) {
  const auto path = dir / seg::kArchiveStateName;
  auto file = io::File::open(path, io::File::Mode::read);
  if (!file) {
    if (file.error().sys_errno == ENOENT) return std::optional<ArchiveState>();
    return std::unexpected(file.error());
  }
  std::vector<std::byte> buf(kMaxStateBytes);
  auto n = file->read_at(0, buf);
  if (!n) return std::unexpected(n.error());
  const std::string text(reinterpret_cast<const char*>(buf.data()), *n);
  ArchiveState s;
  if (std::sscanf(text.c_str(), "synclog-archived 1\nlog_id %16" SCNx64 "\nthrough %" SCNu64,
                  &s.log_id, &s.through) != 2 ||
      encode(s) != text) {
    return make_error(Errc::bad_directory,
                      "archive state file " + path.string() +
                          " does not parse (expected what synclog writes: "
                          "\"synclog-archived 1\", \"log_id <hex>\", \"through <id>\")");
  }
  return std::optional<ArchiveState>(s);
}

Result<void> store_archive_state(const std::filesystem::path& dir, const ArchiveState& state,
                                 uint32_t perms) {
  const auto tmp = dir / seg::kArchiveStateTemp;
  const std::string text = encode(state);
  if (auto r = io::replace_file(dir / seg::kArchiveStateName, tmp, std::as_bytes(std::span(text)),
                                perms);
      !r)
    return r;
  return io::sync_dir(dir);
}

}  // namespace synclog
