// Recovery: scans a log directory once at open and decides, segment by
// segment, which byte ranges replay returns. The rules (docs/durability.md):
//
// - Records are read in order until an end record (continue with the next
//   segment) or a slot that does not validate at offset p.
// - If a later segment begins with a session record naming (segment, p) as
//   the previous end, an earlier recovery already ended the log there:
//   continue in that segment.
// - Otherwise every sync marker found after p (scanning this and the later
//   segments) names a position that was durable when it was written. If one
//   of them lies past p, the bytes at p were durable and are now damaged;
//   else p is in the last, unfinished sync: a torn tail (or a clean end if
//   nothing at all was written from p on).
// - Damage is refused (tolerate_torn_tail, absolute), ends the log
//   (point_in_time) or is skipped (skip_damaged). A loss recorded by an
//   earlier open's loss record was accepted already: every mode skips it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <vector>

#include "synclog/config.h"
#include "synclog/error.h"
#include "synclog/log.h"

namespace synclog::seg {

// Bytes [begin, end) of a segment hold records that replay returns; end is
// UINT32_MAX for a segment still being written (read up to durable()).
struct Extent {
  uint64_t segment = 0;
  uint32_t begin = 0;
  uint32_t end = 0;
};

struct Recovered {
  RecoveryReport report;
  std::vector<Extent> extents;
  std::map<uint64_t, uint64_t> kept;  // segment files that stay: id -> file size
  // Past a torn or clean end (no acknowledged record): removed at open,
  // highest id first.
  std::vector<uint64_t> discard;
  // Losses this open accepts that no earlier open recorded: the new session
  // writes one loss record for each, after its session record.
  std::vector<Damage> losses;
  std::vector<std::string> temp_files;
  uint64_t next_id = 1;
  uint64_t log_id = 0;  // from the segment headers; 0 for an empty directory
};

class Keyring;

// `keys` (may be null: no key source) decrypts encrypted segments; a
// segment whose header names a key the keyring cannot give fails recovery
// with Errc::invalid_config naming the segment and key id.
// With `sealed_ok` and no keys, encrypted records are taken as their
// checksums judge them, unauthenticated (synclog-dump without a key file).
[[nodiscard]] Result<Recovered> recover(const std::filesystem::path& dir, RecoveryMode mode,
                                        Keyring* keys = nullptr, bool sealed_ok = false);

}  // namespace synclog::seg
