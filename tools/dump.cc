#include "dump.h"

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <system_error>

#include "log/dir_lock.h"

namespace synclog::dump {

std::string hex64(uint64_t v) {
  char s[24];
  std::snprintf(s, sizeof s, "%016" PRIx64, v);
  return s;
}

std::string mode_name(RecoveryMode m) {
  std::string name = synclog::to_string(m);
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

std::optional<RecoveryMode> parse_mode(const std::string& s) {
  std::string dashed = s;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  for (RecoveryMode m : {RecoveryMode::tolerate_torn_tail, RecoveryMode::point_in_time,
                         RecoveryMode::absolute, RecoveryMode::skip_damaged}) {
    if (dashed == mode_name(m)) return m;
  }
  return std::nullopt;
}

std::optional<Position> parse_position(const std::string& s) {
  const auto colon = s.find(':');
  if (colon == std::string::npos) return std::nullopt;
  // from_chars, unlike stoull, takes no sign and no leading space.
  auto number = [](const char* b, const char* e) -> std::optional<uint32_t> {
    uint32_t v = 0;
    const auto r = std::from_chars(b, e, v);
    if (b == e || r.ec != std::errc() || r.ptr != e) return std::nullopt;
    return v;
  };
  const char* p = s.data();
  const auto segment = number(p, p + colon);
  const auto offset = number(p + colon + 1, p + s.size());
  if (!segment || !offset) return std::nullopt;
  return Position(*segment, *offset);
}

bool check_dir(const fs::path& dir) {
  std::error_code ec;
  const auto st = fs::status(dir, ec);
  if (!fs::exists(st)) {
    std::fprintf(stderr, "synclog-dump: %s: no such directory\n", dir.c_str());
    return false;
  }
  if (!fs::is_directory(st)) {
    std::fprintf(stderr, "synclog-dump: %s: not a directory\n", dir.c_str());
    return false;
  }
  return true;
}

void warn_if_open(const fs::path& dir) {
  auto holder = DirLock::probe(dir);
  if (!holder) {
    std::fprintf(stderr, "synclog-dump: warning: cannot tell whether the log is open: %s\n",
                 holder.error().message.c_str());
    return;
  }
  if (!*holder) return;
  const std::string who =
      (*holder)->starts_with("pid ") ? "by " + **holder : "by another process (it recorded no pid)";
  std::fprintf(stderr,
               "synclog-dump: warning: log is open %s; it may append or release segments while "
               "this runs, so output may be incomplete\n",
               who.c_str());
}

void print_regions(const char* what, const std::vector<Damage>& regions) {
  for (const auto& d : regions) {
    std::printf("%s: segment %" PRIu64 " offset %" PRIu64 ", %" PRIu64 " bytes: %s\n", what,
                d.at.segment(), d.at.offset(), d.bytes, d.reason.c_str());
  }
}

void note_limit(uint64_t limit, Position next) {
  const std::string at = next.to_string();
  std::fprintf(stderr,
               "synclog-dump: stopped at --limit %" PRIu64
               "; the next record is at %s (--from %s goes on)\n",
               limit, at.c_str(), at.c_str());
}

int fail_recovery(const Error& e) {
  std::fprintf(stderr, "synclog-dump: %s\n", e.describe().c_str());
  return e.code == Errc::io_error ? kUsage : kDamaged;
}

Result<seg::Recovered> recover_for(const Common& c, RecoveryMode mode) {
  return seg::recover(c.dir, mode, c.keys.get(), true);
}

}  // namespace synclog::dump
