// What the synclog-dump subcommands share: exit codes, options, the printed
// forms of positions and kinds, and the checks run before any command.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "segments/format.h"
#include "segments/recovery.h"
#include "segments/transform.h"
#include "synclog/config.h"
#include "synclog/error.h"
#include "synclog/log.h"
#include "synclog/position.h"

namespace synclog::dump {

namespace fs = std::filesystem;

inline constexpr int kHealthy = 0;
// Damage, a bad segment header, foreign files: the log as Log::open would
// see it is not healthy.
inline constexpr int kDamaged = 1;
// Usage errors, or a directory that cannot be read at all.
inline constexpr int kUsage = 2;

struct Common {
  fs::path dir;
  RecoveryMode mode = RecoveryMode::tolerate_torn_tail;
  bool json = false;
  // From --key-file: decrypts encrypted records. Without it they are shown
  // as stored, marked encrypted, and taken as their checksums judge them.
  std::shared_ptr<seg::Keyring> keys;
};

// Which of the records replay returns a command looks at: from <= position
// < to, at most `limit` of the records it shows.
struct Range {
  std::optional<Position> from, to;
  std::optional<uint64_t> limit;
};

// seg::recover as the tool runs it: with the key file's keys, or sealed
// records allowed without one.
Result<seg::Recovered> recover_for(const Common& c, RecoveryMode mode);

int cmd_list(const Common& c);
int cmd_verify(const Common& c);
int cmd_config(const Common& c);
int cmd_stats(const Common& c, const Range& range);

// `follow`: a CDC directory's consumer.
struct FollowOptions {
  bool remove = false;  // --delete: remove each segment and its index once consumed
  std::optional<std::chrono::microseconds> until_idle;  // stop after this long without progress
};
int cmd_follow(const Common& c, const FollowOptions& f);

enum class PrintFormat { line, hex, raw };
int cmd_print(const Common& c, const Range& range, PrintFormat format, bool all);

std::string hex64(uint64_t v);
inline const char* kind_name(seg::Kind k) { return seg::to_string(k); }
// The recovery mode's name with dashes, as --mode takes it.
std::string mode_name(RecoveryMode m);
std::optional<RecoveryMode> parse_mode(const std::string& s);
// "SEG:OFF" in decimal, exactly as Position::to_string prints it; nullopt
// for anything else (signs, spaces, hex, an offset past 32 bits).
std::optional<Position> parse_position(const std::string& s);

// A missing or unreadable directory is a usage problem, not damage: false
// after saying so on stderr.
bool check_dir(const fs::path& dir);
// Says on stderr that a live process holds the log's LOCK: the log may grow
// or release segments while the tool reads it.
void warn_if_open(const fs::path& dir);
// "<what>: segment S offset O, N bytes: reason", one line per region.
void print_regions(const char* what, const std::vector<Damage>& regions);
// Says on stderr where a walk cut short by --limit would go on.
void note_limit(uint64_t limit, Position next);
// Reports a failed recovery on stderr; the exit code it deserves.
int fail_recovery(const Error& e);

}  // namespace synclog::dump
