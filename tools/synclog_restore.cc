// synclog-restore: point-in-time restore from archived segments
// (docs/operations.md, "Restoring from the archive"). A thin shell over
// synclog::restore(): parses the stop point, prints the report.
#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <optional>
#include <string>

#include "synclog/restore.h"

namespace {

constexpr int kUsage = 2;

std::optional<uint64_t> number(std::string_view s) {
  uint64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<synclog::Position> parse_position(const std::string& s) {
  const auto colon = s.find(':');
  if (colon == std::string::npos) return std::nullopt;
  const auto segment = number(std::string_view(s).substr(0, colon));
  const auto offset = number(std::string_view(s).substr(colon + 1));
  if (!segment || !offset || *segment > UINT32_MAX || *offset > UINT32_MAX) return std::nullopt;
  return synclog::Position(*segment, *offset);
}

// Unix ns, or UTC as YYYY-MM-DDTHH:MM:SS[.fraction]Z.
std::optional<uint64_t> parse_time(const std::string& s) {
  if (auto ns = number(s)) return ns;
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6) {
    return std::nullopt;
  }
  std::string_view rest = std::string_view(s).substr(static_cast<size_t>(consumed));
  uint64_t frac = 0;
  if (!rest.empty() && rest.front() == '.') {
    rest.remove_prefix(1);
    size_t digits = 0;
    while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
    if (digits == 0 || digits > 9) return std::nullopt;
    frac = *number(rest.substr(0, digits));
    for (size_t k = digits; k < 9; ++k) frac *= 10;
    rest.remove_prefix(digits);
  }
  if (rest != "Z") return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const time_t secs = timegm(&tm);
  if (secs < 0) return std::nullopt;
  return static_cast<uint64_t>(secs) * 1'000'000'000ull + frac;
}

std::string ids(const std::vector<uint64_t>& v) {
  std::string s;
  for (uint64_t id : v) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s.empty() ? "-" : s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "synclog-restore: build a new log directory from archived segments (and the log's own "
      "directory) up to a stop point; never writes into the archive or the live log"};
  synclog::RestoreOptions o;
  std::string archive, live, target, position, time, key_file;
  bool group_read = false;
  app.add_option("--archive", archive, "directory of archived segment files")->required();
  app.add_option("--live", live, "the log's own directory, for segments not archived yet");
  app.add_option("--target", target, "the new log directory (must not exist)")->required();
  auto* pos = app.add_option("--to-position", position,
                             "keep records at or before SEG:OFF (a position append() returned)");
  auto* at = app.add_option("--to-time", time,
                            "keep records followed by a sync that began at or before this time: "
                            "unix ns or YYYY-MM-DDTHH:MM:SS[.fraction]Z (UTC)");
  pos->excludes(at);
  app.add_flag("--group-read", group_read, "files 0640 and the directory 0750");
  app.add_option("--key-file", key_file,
                 "for an encrypted log: its keys (the encryption_key_file format); the restored "
                 "log opens with the same keys");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kUsage;
  }
  o.archive = archive;
  o.live = live;
  o.target = target;
  o.group_read = group_read;
  o.encryption_key_file = key_file;
  if (!position.empty()) {
    const auto p = parse_position(position);
    if (!p) {
      std::fprintf(stderr, "synclog-restore: --to-position: '%s' is not SEG:OFF\n",
                   position.c_str());
      return kUsage;
    }
    o.stop = synclog::RestoreStop::position;
    o.position = *p;
  } else if (!time.empty()) {
    const auto t = parse_time(time);
    if (!t) {
      std::fprintf(stderr,
                   "synclog-restore: --to-time: '%s' is neither unix ns nor "
                   "YYYY-MM-DDTHH:MM:SS[.fraction]Z\n",
                   time.c_str());
      return kUsage;
    }
    o.stop = synclog::RestoreStop::time;
    o.time_ns = *t;
  }
  auto r = synclog::restore(o);
  if (!r) {
    std::fprintf(stderr, "synclog-restore: %s\n", r.error().describe().c_str());
    return 1;
  }
  std::printf("restored %llu records into %s (stop: %s)\n",
              static_cast<unsigned long long>(r->records), target.c_str(),
              synclog::to_string(r->stop));
  std::printf("last record   %s\n", r->last ? r->last->to_string().c_str() : "-");
  std::printf("log ends at   %s\n", r->end.to_string().c_str());
  std::printf("from archive  %s\n", ids(r->from_archive).c_str());
  std::printf("from live     %s\n", ids(r->from_live).c_str());
  std::printf("in both       %s\n", ids(r->in_both).c_str());
  std::printf("dropped       %s\n", ids(r->dropped).c_str());
  std::printf("why           %s\n", r->reason.c_str());
  return 0;
}
