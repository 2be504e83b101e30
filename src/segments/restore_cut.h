// Where a restore ends the log (include/synclog/restore.h): a walk of the
// records recovery replays, in log order, that finds the last record the
// stop point keeps, and the one write that makes the log end right after it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "segments/recovery.h"
#include "synclog/error.h"
#include "synclog/position.h"
#include "synclog/restore.h"

namespace synclog::seg {

struct CutRule {
  RestoreStop stop = RestoreStop::end;
  Position position;     // RestoreStop::position: keep records at or before it
  uint64_t time_ns = 0;  // RestoreStop::time
};

struct Cut {
  Position at;  // just past the last record kept: the end record goes here
  uint64_t records = 0;
  std::optional<Position> last;
  std::string reason;
};

// Walks the records `rec` (recovery of `dir`, tolerate-torn-tail, with
// `keys`) replays, decrypting with `keys` (may be null: no key source).
// Errc::invalid_argument if the rule keeps no record, splits a batch, or
// names a position at or past the end.
[[nodiscard]] Result<Cut> find_cut(const std::filesystem::path& dir, const Recovered& rec,
                                   const CutRule& rule, Keyring* keys);

// Judges an archived segment copy (`file`) in which the replay of the
// copies ends at `end` without an end record. A session that crashed
// leaves its last segment so, and the next session archives it at once:
// it is complete up to that recovered end (docs/durability.md, Restore),
// and accepted if the copy is whole (the size its header gives: segment
// files are allocated in full) and holds no end record of its own past
// `end`, which a completed segment always has and a crashed one never
// does. Otherwise the copy is cut short or damaged: Errc::corruption.
[[nodiscard]] Result<void> check_crashed_end(const std::filesystem::path& file, Position end);

// Ends segment `at.segment()` of `dir` at `at`: zeros from there to the end
// of the file (so nothing after it can ever validate again), then an end
// record at `at`, synced. The caller removes the later segments.
[[nodiscard]] Result<void> write_cut(const std::filesystem::path& dir, Position at);

}  // namespace synclog::seg
