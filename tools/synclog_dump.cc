// synclog-dump: inspect and verify a synclog log directory without changing it.
//
//   synclog-dump list   DIR [--mode M] [--json]   one row per segment file
//   synclog-dump verify DIR [--mode M] [--json]   recovery dry run; exit 1 on damage
//   synclog-dump print  DIR [RANGE] [--all] [--hex|--raw|--json] [--mode M]
//   synclog-dump stats  DIR [RANGE] [--mode M] [--json]
//   synclog-dump config DIR [--json]              what the segment headers record
//   synclog-dump follow CDC_DIR [--json] [--delete] [--until-idle DURATION]
//   RANGE: [--from SEG:OFF] [--to SEG:OFF] [--limit N]; every command takes
//   --key-file FILE to decrypt an encrypted log
//
// Everything here but `follow --delete` is read-only, and `follow` reads a
// CDC directory, not a log directory. Log::open is never called: it would start a
// new segment and delete temp files. The tool runs the same recovery scan
// (seg::recover) and the format decoders that Log::open uses, so "verify"
// answers exactly what Log::open would say about the directory. The manual
// is docs/dump.md.
#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <optional>
#include <string>

#include "dump.h"
#include "segments/transform.h"

using namespace synclog::dump;

namespace {

struct Args {
  std::string dir, mode = "tolerate-torn-tail";
  // Optional, so that an empty value ("--from ''") is refused, not ignored.
  std::optional<std::string> from, to, limit;
  bool json = false, hex = false, raw = false, all = false, remove = false;
  std::optional<std::string> until_idle;
  std::string key_file;
};

// "500ms", "2s", "250us": a positive duration.
std::optional<std::chrono::microseconds> parse_duration(const std::string& s) {
  uint64_t n = 0;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, n);
  if (ec != std::errc() || p == s.data() || n == 0) return std::nullopt;
  const std::string unit(p, end);
  uint64_t mult = 0;
  if (unit == "us") mult = 1;
  if (unit == "ms") mult = 1000;
  if (unit == "s") mult = 1000000;
  if (mult == 0 || n > UINT64_MAX / mult / 2) return std::nullopt;
  return std::chrono::microseconds(n * mult);
}

void add_common(CLI::App* cmd, Args& a, bool with_mode) {
  cmd->add_option("dir", a.dir, "log directory")->required()->type_name("DIR");
  cmd->add_flag("--json", a.json, "JSON output (one object per line)");
  cmd->add_option("--key-file", a.key_file,
                  "decrypt encrypted records with the keys in FILE (the encryption_key_file "
                  "format); without it they are shown as stored, marked encrypted")
      ->type_name("FILE");
  if (with_mode) {
    cmd->add_option("--mode", a.mode,
                    "recovery mode: tolerate-torn-tail (Log::open's default), point-in-time, "
                    "absolute or skip-damaged");
  }
}

void add_range(CLI::App* cmd, Args& a) {
  cmd->add_option("--from", a.from, "start at the first record at or after this position")
      ->type_name("SEG:OFF");
  cmd->add_option("--to", a.to, "stop before this position")->type_name("SEG:OFF");
  cmd->add_option("--limit", a.limit, "at most N records")->type_name("N");
}

bool usage_error(const std::string& text) {
  std::fprintf(stderr, "synclog-dump: %s\n", text.c_str());
  return false;
}

bool parse_range(const Args& a, Range* out) {
  for (auto [name, text, slot] :
       {std::tuple{"--from", &a.from, &out->from}, std::tuple{"--to", &a.to, &out->to}}) {
    if (!*text) continue;
    *slot = parse_position(**text);
    if (!*slot) {
      return usage_error(std::string(name) + ": bad position '" + **text +
                         "' (expected SEG:OFF in decimal as the tool prints it, e.g. 3:4096)");
    }
  }
  if (out->from && out->to && *out->from > *out->to) {
    return usage_error("--from " + out->from->to_string() + " is after --to " +
                       out->to->to_string());
  }
  if (a.limit) {
    uint64_t n = 0;
    const char* end = a.limit->data() + a.limit->size();
    const auto r = std::from_chars(a.limit->data(), end, n);
    if (r.ec != std::errc() || r.ptr != end || n == 0) {
      return usage_error("--limit: bad count '" + *a.limit +
                         "' (expected a whole number of records, at least 1)");
    }
    out->limit = n;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "synclog-dump: inspect and verify a synclog log directory (read-only; never modifies it)"};
  app.require_subcommand(1);
  Args a;

  auto* list = app.add_subcommand("list", "one row per segment file, with the durable end");
  add_common(list, a, true);
  auto* verify = app.add_subcommand(
      "verify", "run recovery read-only; exit 0 if healthy, 1 with a line per damaged region");
  add_common(verify, a, true);
  auto* print = app.add_subcommand("print", "the records replay returns, one line each");
  add_common(print, a, true);
  add_range(print, a);
  auto* hex = print->add_flag("--hex", a.hex, "a hex dump of each data record's payload");
  auto* raw = print->add_flag(
      "--raw", a.raw, "'SEG:OFF KIND LEN ' then the bytes and a newline (not to a terminal)");
  hex->excludes(raw);
  print->get_option("--json")->excludes(hex)->excludes(raw);
  print->add_flag("--all", a.all, "also sync, session, loss and end markers");
  auto* stats = app.add_subcommand(
      "stats", "records and bytes per kind, sizes, segments, sessions, sync markers, damage");
  add_common(stats, a, true);
  add_range(stats, a);
  auto* config = app.add_subcommand("config", "what the segment headers record about the log");
  add_common(config, a, false);
  auto* follow = app.add_subcommand(
      "follow", "print the records of a CDC directory (cdc_dir) as they become durable");
  follow->add_option("dir", a.dir, "CDC directory (the log's cdc_dir)")
      ->required()
      ->type_name("CDC_DIR");
  follow->add_flag("--json", a.json, "JSON output (one object per line)");
  follow
      ->add_option("--key-file", a.key_file,
                   "decrypt encrypted records with the keys in FILE (the encryption_key_file "
                   "format); without it they are shown as stored, marked encrypted")
      ->type_name("FILE");
  follow->add_flag("--delete", a.remove,
                   "remove each segment and its index once every record of it was printed");
  follow
      ->add_option("--until-idle", a.until_idle,
                   "stop once nothing new was printed for this long (e.g. 500ms, 2s); "
                   "default: run until SIGINT")
      ->type_name("DURATION");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message; its exit codes vary by error, ours is 2.
    return app.exit(e) == 0 ? 0 : kUsage;
  }

  Common c;
  c.dir = a.dir;
  c.json = a.json;
  const auto mode = parse_mode(a.mode);
  if (!mode) {
    usage_error("--mode: unknown recovery mode '" + a.mode +
                "' (allowed: tolerate-torn-tail, point-in-time, absolute, skip-damaged)");
    return kUsage;
  }
  c.mode = *mode;
  Range range;
  if (!parse_range(a, &range)) return kUsage;
  if (!a.key_file.empty()) {
    auto loaded = synclog::seg::key_source_from_file(a.key_file);
    if (!loaded) {
      usage_error("--key-file: " + loaded.error().message);
      return kUsage;
    }
    c.keys = std::make_shared<synclog::seg::Keyring>(std::move(*loaded));
  }
  if (!check_dir(c.dir)) return kUsage;
  if (*follow) {
    FollowOptions f;
    f.remove = a.remove;
    if (a.until_idle) {
      f.until_idle = parse_duration(*a.until_idle);
      if (!f.until_idle) {
        usage_error("--until-idle: bad duration '" + *a.until_idle +
                    "' (expected a positive whole number with us, ms or s, e.g. 500ms)");
        return kUsage;
      }
    }
    return cmd_follow(c, f);
  }
  warn_if_open(c.dir);

  if (*list) return cmd_list(c);
  if (*verify) return cmd_verify(c);
  if (*config) return cmd_config(c);
  if (*stats) return cmd_stats(c, range);
  const PrintFormat format =
      a.raw ? PrintFormat::raw : (a.hex ? PrintFormat::hex : PrintFormat::line);
  return cmd_print(c, range, format, a.all);
}
