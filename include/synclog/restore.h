// Point-in-time restore: builds a new log directory from archived segments
// (Config::archive_command or Config::archive) and, optionally, the log's
// own directory, holding the records up to a stop point. docs/durability.md
// ("Restore") says what it guarantees; docs/operations.md how to run it.
//
//   synclog::RestoreOptions o;
//   o.archive = "/backup/wal";  o.live = "/data/wal";  o.target = "/data/wal-restored";
//   o.stop = synclog::RestoreStop::time;  o.time_ns = ...;  // unix ns
//   auto report = synclog::restore(o);      // then Log::open with dir = o.target
//
// Only reads the segment files of `archive` and `live`. It holds the live
// directory's LOCK while it copies, so no process opens that log meanwhile
// (and an open one is refused); if `live` (a log directory) had no LOCK
// file, an empty one stays behind. Two restores into the same target at once: the second
// finds the first's staging directory and fails.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "synclog/config.h"
#include "synclog/error.h"
#include "synclog/export.h"
#include "synclog/position.h"

namespace synclog {

enum class RestoreStop {
  end,       // every record recovery would replay
  position,  // records at or before RestoreOptions::position (inclusive)
  time,      // records followed by a sync that began at or before RestoreOptions::time_ns
};
SYNCLOG_API const char* to_string(RestoreStop v);

struct RestoreOptions {
  // Archived segment files (NNNNNNNNNNNNNNNNNNNN.seg). Other names in it
  // are passed over (an archive command may keep its own files there).
  std::filesystem::path archive;
  // The log's own directory, for the segments not archived yet; empty for
  // none (an archive-only restore). Named, it must exist and hold segment
  // files of the archive's log: a missing path, a directory that is not a
  // log (nothing is written into it) and another log's directory (both log
  // ids named) are Errc::bad_directory. Its segments and the archive's are
  // one chain: a segment in both must be byte-identical in both, unless its
  // archived copy lies past what the live directory's ARCHIVED confirms
  // (then the live copy is taken).
  std::filesystem::path live;
  // Where the restored log goes: must not exist (its parent must). It is
  // built in `target` + ".restoring" and renamed into place once complete
  // and synced, so `target` never holds a partial restore. A leftover
  // ".restoring" directory (an interrupted restore) is an error naming it.
  std::filesystem::path target;
  RestoreStop stop = RestoreStop::end;
  // RestoreStop::position: a position append() returned (or a Record
  // carried). A batch is restored whole or not at all: a position inside a
  // batch but before its last record is Errc::invalid_argument. A position
  // at or past the end of the log is Errc::invalid_argument too (use end).
  Position position;
  // RestoreStop::time: unix time in ns (CLOCK_REALTIME).
  uint64_t time_ns = 0;
  // Files and the directory get 0640/0750 instead of 0600/0700.
  bool group_read = false;
  // For an encrypted log: at most one of these, as in Config (the same key
  // file format, the same callback). Restore decrypts with it to judge the
  // copies and find the stop point; the restored log keeps its segments as
  // they were, so it opens with the same keys. Neither: an encrypted
  // segment is an error naming it and its key id.
  std::filesystem::path encryption_key_file;
  KeySource encryption_keys;
};

struct RestoreReport {
  // Segment ids, ascending, by where they came from. Each lists the ids
  // copied, including those then dropped.
  std::vector<uint64_t> from_archive;  // only in the archive
  // Only in the live directory, or in both with an archived copy that
  // differs and that the live directory's ARCHIVED does not confirm.
  std::vector<uint64_t> from_live;
  std::vector<uint64_t> in_both;  // in both, byte-identical: copied from the archive
  std::vector<uint64_t> dropped;  // past the stop point: not in the restored log
  uint64_t records = 0;           // records the restored log replays
  std::optional<Position> last;   // the last of them; none if it holds none
  // Where the restored log ends (Log::open's RecoveryReport::end): just past
  // an end record written after the last record kept.
  Position end;
  RestoreStop stop = RestoreStop::end;
  std::string reason;  // why it stopped there, in words
};

// Errc::invalid_argument for bad options or a stop point that keeps no
// record, Errc::bad_directory for a missing archive, an existing target, a
// live directory that is missing, not a log or another log's, or a live
// log in use, Errc::corruption for a broken chain (a missing segment,
// named) or a damaged copy; nothing is left in `target` then.
[[nodiscard]] SYNCLOG_API Result<RestoreReport> restore(const RestoreOptions& options);

}  // namespace synclog
