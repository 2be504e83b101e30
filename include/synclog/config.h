// Config: everything chosen at startup. Fill it in code, or parse it from a
// "key=value,key=value" string (the same keys, listed in docs/config.md).
// Log::open validates it; nothing is silently adjusted.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "synclog/error.h"
#include "synclog/export.h"

namespace synclog {

// How bytes reach stable storage (docs/backends.md). auto: the fastest
// that starts, in the order measured for the configured mode on the
// directory's medium (the table in docs/backends.md).
enum class BackendKind { msync, msync_pool, uring, aio, pwrite, auto_select };
// How a segment is held in memory: a shared mapping, or a private aligned
// buffer written with O_DIRECT or with buffered pwrite. auto: the kind the
// backend syncs (msync, msync-pool: mmap; uring, aio: direct; pwrite:
// buffered); with backend=auto, whichever the chosen backend syncs.
enum class SegmentKind { mmap, direct, buffered, auto_select };
// When syncs happen and whether append() waits for them.
enum class SyncMode { periodic, batch, group };
// What recovery does with damaged data (docs/durability.md): drop only an
// unfinished write and refuse proven damage (the default); stop at the first
// damage and keep the prefix; skip damaged regions; refuse anything.
enum class RecoveryMode { tolerate_torn_tail, point_in_time, absolute, skip_damaged };
// Direct I/O: how the last partial block of a sync is written.
enum class TailPolicy { pad, rewrite };
// Direct I/O: how a write becomes durable: RWF_DSYNC on each write, or
// plain writes then fdatasync; auto: dsync only on filesystems known to
// honour RWF_DSYNC on io_uring and libaio writes, else fdatasync
// (docs/backends.md).
enum class DirectSync { dsync, fdatasync, auto_select };
// After a failed sync: stop the log (every append gets the error), or abort
// the process (for engines that would rather restart and recover).
enum class FailurePolicy { stop, abort };
// Per-record compression of user records (docs/format.md, Transformed
// records): each stored frame on its own, kept plain where it would not shrink.
enum class Compression { none, lz4, zstd };
// Per-record authenticated encryption of user records.
enum class Encryption { none, aes_256_gcm };

// A master key: `id` names it in segment headers, so that a segment
// written under it can find it again after a rotation.
struct EncryptionKey {
  uint32_t id = 0;
  std::array<std::byte, 32> bytes{};
};
// Where master keys come from (a KMS): nullopt asks for the current key,
// which new segments are written under; a key id asks for that key, to
// read a segment written under it. Called at open and while reading, from
// any thread of the log; it must be thread-safe and must not call the log.
using KeySource = std::function<Result<EncryptionKey>(std::optional<uint32_t> key_id)>;

struct SYNCLOG_API Config {
  std::filesystem::path dir;

  BackendKind backend = BackendKind::auto_select;
  SegmentKind segment_kind = SegmentKind::auto_select;
  SyncMode mode = SyncMode::batch;

  // periodic: sync this often; appends block once the last completed sync is
  // older than interval + lag_bound.
  std::chrono::microseconds interval{10'000};
  std::chrono::microseconds lag_bound{100'000};
  // group: at most one sync per window.
  std::chrono::microseconds window{1'000};

  uint64_t segment_size = 32ull << 20;  // bytes per segment file
  uint32_t spare_segments = 1;          // created ahead of need
  bool recycle = true;                  // reuse released files instead of deleting
  bool prezero = true;                  // write zeros into new files (fast later syncs)
  uint64_t max_total_size = 0;          // bytes of segment files; 0 = unbounded
  // The largest record append() takes, in bytes; 0 = max_unfragmented_size().
  // Records above that are written as fragments across segments (up to
  // 1GiB); batches stay within max_unfragmented_size().
  uint64_t max_record = 0;
  // How long an append waits for a segment (size limit, full disk) before
  // it fails with Errc::no_space.
  std::chrono::milliseconds allocation_timeout{5'000};

  RecoveryMode recovery = RecoveryMode::tolerate_torn_tail;

  // Used by the backends that need them.
  uint32_t sync_threads = 4;
  uint32_t queue_depth = 8;
  // Batch mode, direct segments with tail=pad: syncs that may be in flight
  // at once, each writing its own blocks; durable() advances over the
  // completed prefix. 1 = one sync at a time.
  uint32_t syncs_in_flight = 1;
  TailPolicy tail = TailPolicy::pad;
  DirectSync direct_sync = DirectSync::auto_select;
  // Latency histograms and counters (Log::stats()); off saves two clock
  // reads per append.
  bool metrics = true;
  FailurePolicy on_sync_failure = FailurePolicy::stop;
  // Direct I/O alignment in bytes; 0 = probe the filesystem (statx
  // STATX_DIOALIGN, then the device's logical block size).
  uint32_t block_size = 0;

  // Create `dir` (not its parents) if it is missing, owner-only like the
  // files, and make its entry durable before anything is written in it.
  bool create_dir = false;
  // Files 0640 and a created directory 0750 (group may read, as for a
  // backup tool), instead of 0600 and 0700.
  bool group_read = false;

  // Archiving (docs/durability.md, Archiving): each segment, once complete
  // (a later segment was started, or the log closed) and durable, is
  // handed to one of these on a thread of the log, in id order, until it
  // succeeds; release_before() keeps a segment until then. At most one may
  // be set; neither = no archiving. Both are called again for a segment
  // if a crash comes before the success was recorded: they must be
  // idempotent.
  //
  // A shell command run with /bin/sh -c: %p is replaced by the segment
  // file's full path, %f by its file name, %% by %. Exit status 0 means
  // archived. The file must only be read.
  std::string archive_command;
  // The same in code: called with the segment file's full path and its id;
  // success means archived. It must only read the file, must not throw and
  // must not call the log. Not part of parse() or to_string().
  std::function<Result<void>(const std::filesystem::path& path, uint64_t segment_id)> archive;
  // The built-in archive, durable by construction: the library copies each
  // segment into this existing directory itself (as <name>.tmp, fdatasynced,
  // renamed to the segment's file name, the directory fsynced) before it
  // counts it archived. Not together with archive_command or the hook.
  std::filesystem::path archive_dir;

  // Change data capture (docs/operations.md, Change data capture): every
  // segment of the log is hard-linked into this directory before it can
  // become the active segment, with an index file per segment that names
  // its durable end. A consumer in another process reads them and deletes
  // what it has consumed. Empty = off. It must exist, must be on the same
  // filesystem as `dir` (Log::open probes with a link) and must be neither
  // `dir` nor inside it.
  std::filesystem::path cdc_dir;
  // Bytes of files cdc_dir may hold; 0 = unbounded. When a new segment
  // would not fit, no spare is made until the consumer deletes files:
  // appends wait up to allocation_timeout, then fail with Errc::no_space
  // naming CDC. Nothing is dropped.
  uint64_t cdc_max_size = 0;
  // Transforms of user records (docs/format.md, Transformed records).
  Compression compression = Compression::none;
  // lz4: acceleration, 1 (best ratio, the default for 0) .. 65537 (fastest);
  // zstd: 1..19 (0 = 3). Accepted only with compression on.
  int compression_level = 0;
  Encryption encryption = Encryption::none;
  // With encryption: exactly one of these. A text file of "<key id> <64 hex
  // digits>" lines, the last line's key the current one, readable by its
  // owner only; or a key source in code (not part of parse()/to_string()).
  std::filesystem::path encryption_key_file;
  KeySource encryption_keys;

  // Parses "key=value,key=value" on top of the defaults. Unknown keys and
  // bad values are errors that name the key and the allowed values.
  [[nodiscard]] static Result<Config> parse(std::string_view text);
  // Reads a TOML file of the same keys at top level (sizes and durations
  // as strings like "32MiB" and "10ms", or integers for bytes and counts).
  [[nodiscard]] static Result<Config> load_file(const std::filesystem::path& path);
  // The same from TOML text; `origin` names it in messages.
  [[nodiscard]] static Result<Config> parse_toml(std::string_view text,
                                                 const std::string& origin = "config");
  // Applies one key to this config (shared by the string and file parsers).
  [[nodiscard]] Result<void> set(std::string_view key, std::string_view value);
  // Checks values and combinations; Log::open calls it.
  [[nodiscard]] Result<void> validate() const;
  // The largest record append() accepts: max_record, or by default
  // max_unfragmented_size().
  uint64_t max_record_size() const;
  // The largest record (or encoded batch) written as one data record: half
  // of segment_size less 64, at most 16MiB-1; with encryption 16 bytes
  // less (the tag each stored record carries).
  uint64_t max_unfragmented_size() const;
  // "key=value,..." with every key, round-trips through parse().
  std::string to_string() const;
  // Permissions of the files and of a directory the log creates.
  uint32_t file_perms() const { return group_read ? 0640 : 0600; }
  uint32_t dir_perms() const { return group_read ? 0750 : 0700; }
};

// The segment kind `backend` syncs; auto_select for BackendKind::auto_select.
SYNCLOG_API SegmentKind segment_kind_for(BackendKind backend);

SYNCLOG_API const char* to_string(BackendKind v);
SYNCLOG_API const char* to_string(SegmentKind v);
SYNCLOG_API const char* to_string(SyncMode v);
SYNCLOG_API const char* to_string(RecoveryMode v);
SYNCLOG_API const char* to_string(TailPolicy v);
SYNCLOG_API const char* to_string(DirectSync v);
SYNCLOG_API const char* to_string(FailurePolicy v);
SYNCLOG_API const char* to_string(Compression v);
SYNCLOG_API const char* to_string(Encryption v);

}  // namespace synclog
