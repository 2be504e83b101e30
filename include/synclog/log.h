// synclog: a commit log (write-ahead log) I/O engine.
//
//   auto log = synclog::Log::open(config);          // recovers what is there
//   for (auto r = log.value()->read(); ...)         // replay
//   auto pos = log.value()->append(bytes);           // durable on return in batch/group mode
//
// Thread safety: append() (every overload), append_batch(), append_async(),
// wait_durable(), sync(), durable(), stats(), read(), segments(), disk_bytes()
// and oldest() may be called from any number of threads at once.
// release_before() may be called concurrently with appends. close() must not
// race with other calls (callbacks of append_async() may still be pending:
// close() runs or fails each); the destructor closes a log that is still open.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "synclog/config.h"
#include "synclog/error.h"
#include "synclog/export.h"
#include "synclog/position.h"
#include "synclog/stats.h"
#include "synclog/version.h"

namespace synclog {

struct Record {
  Position position;                // where the record starts (inside its batch for a batch's
                                    // records); what append() returned; pass to release_before
  std::span<const std::byte> data;  // valid until the Reader's next call; may be empty
};

// A region recovery could not use, with the reason (a checksum mismatch, a
// torn write, a missing segment...).
struct Damage {
  Position at;
  uint64_t bytes = 0;
  std::string reason;
};

// What Log::open found. `damage` holds every skipped region in
// skip_damaged mode, and the region that stopped replay otherwise
// (point_in_time). A loss this open accepted is written into the log, so
// every later open lists it in `accepted`.
struct RecoveryReport {
  Position end;             // replay ends here; new appends go to a new segment
  uint64_t records = 0;     // records that replay returns
  uint32_t segments = 0;    // segment files found
  bool torn_tail = false;   // an unfinished write after the last complete sync was dropped
  uint64_t torn_bytes = 0;  // bytes of that unfinished write (up to the segment end)
  std::vector<Damage> damage;
  // Losses that earlier opens accepted (point-in-time or skip-damaged), as
  // their loss records say: what was dropped, where, and why.
  std::vector<Damage> accepted;
};

// Yields records in log order. Obtained from Log::read(); it sees the records
// that were durable when it was made. Not thread-safe; the Log must outlive it.
class SYNCLOG_API Reader {
 public:
  Reader(Reader&&) noexcept;
  Reader& operator=(Reader&&) noexcept;
  ~Reader();

  // The next record, std::nullopt at the end, or an error (a segment released
  // under the reader, an I/O error, damage that appeared after open). An
  // empty record is a Record with empty data, never the end.
  [[nodiscard]] Result<std::optional<Record>> next();

  struct Impl;
  explicit Reader(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

// What a segment file is doing, as Log::segments() reports it.
enum class SegmentState {
  spare,       // made ahead (header only, no records): the next segment appends go to
  recycling,   // released, waiting to become a spare (holds old bytes that never replay)
  active,      // the newest segment of this session: appends go to it
  sealed,      // no more appends go to it, but it holds the durable position or
               // records after it, so release_before keeps it for now
  releasable,  // wholly before the durable position: release_before(durable()) lets it go
};
SYNCLOG_API const char* to_string(SegmentState state) noexcept;

// One segment file in the log directory.
struct SegmentInfo {
  uint64_t id = 0;  // a spare's future id; a recycling file's former id
  std::filesystem::path path;
  uint64_t bytes = 0;  // file size
  // The first and last durable data record it holds (what append()
  // returned for them); none if it holds none, like a spare, or a segment
  // whose records are not durable yet.
  std::optional<Position> first;
  std::optional<Position> last;
  SegmentState state = SegmentState::spare;
};

// What one release_before() call let go.
struct ReleaseReport {
  std::vector<uint64_t> ids;    // released segments, ascending
  uint32_t deleted = 0;         // files removed
  uint32_t recycled = 0;        // files kept to become spares (their bytes stay on disk)
  uint64_t bytes_deleted = 0;   // returned to the filesystem
  uint64_t bytes_recycled = 0;  // still on disk, as spares-to-be
  // The first record read() now returns (Log::oldest() after the call).
  std::optional<Position> oldest;
  // With archiving (Config::archive_command or Config::archive): segments
  // this call would have let go but kept, ascending, because they are not
  // archived yet. They stay in the log (readable, counted in
  // max_total_size); a later call lets them go once they are archived.
  // Always empty without archiving. Not an error.
  std::vector<uint64_t> unarchived;
};

class Log;

// Follows the log as records become durable: for change-data capture and
// replication from another thread of the same process. Survives segment
// switches; a segment released while the tailer still needs it is
// Errc::released. Not thread-safe; the Log must outlive it.
class SYNCLOG_API Tailer {
 public:
  Tailer(Tailer&&) noexcept;
  Tailer& operator=(Tailer&&) noexcept;
  ~Tailer();

  // The next durable record, waiting up to `timeout` for one; std::nullopt
  // if none became durable in time. The span is valid until the next call.
  [[nodiscard]] Result<std::optional<Record>> next(std::chrono::milliseconds timeout);

  struct Impl;
  explicit Tailer(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

class SYNCLOG_API Log {
 public:
  // Opens or creates the log in config.dir and recovers it (see
  // config.recovery). Fails with a message naming the problem on bad config,
  // an unusable directory, foreign files or damage the recovery mode forbids.
  [[nodiscard]] static Result<std::unique_ptr<Log>> open(const Config& config);

  ~Log();
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;

  // Appends one record (0 bytes to config.max_record_size(); an empty
  // record is a record like any other: it has its own position and readers
  // return it with empty data). A record above
  // config.max_unfragmented_size() (allowed with config.max_record) is
  // written in fragments across segments and replays whole or not at all;
  // its position is where it starts, and it is durable once all of it is. In batch and group mode
  // it returns once the record is durable; in periodic mode at once. After a sync failure every
  // call returns Errc::failed.
  [[nodiscard]] Result<Position> append(std::span<const std::byte> record);
  [[nodiscard]] Result<Position> append(std::string_view record) {
    return append(std::as_bytes(std::span(record.data(), record.size())));
  }

  // Appends one record given in pieces (gather input): the record is their
  // concatenation, checksummed and copied into the log with no intermediate
  // copy. Empty pieces are allowed, and so are no pieces or only empty ones
  // (an empty record); the total has the limits, the errors and the wait of
  // append(). The pieces are read only during the call.
  [[nodiscard]] Result<Position> append(std::span<const std::span<const std::byte>> pieces);

  // Appends `records` as one write batch: contiguous in the log, in order,
  // and recovered all or none (a crash never replays part of a batch).
  // Returns each record's position, ascending; readers, tailers, read(from)
  // and release_before treat them like the positions append() returns. In
  // batch and group mode it returns once every record is durable; in
  // periodic mode at once. Records may be empty (each still has its own
  // position). Errc::invalid_argument for an empty batch (no records), or a
  // batch whose encoding (8 bytes, plus 8 per record and each record padded
  // to 8) exceeds config.max_unfragmented_size(): a batch is one record
  // under one checksum, never fragmented. Thread-safe like append();
  // concurrent batches never interleave.
  [[nodiscard]] Result<std::vector<Position>> append_batch(
      std::span<const std::span<const std::byte>> records);
  [[nodiscard]] Result<std::vector<Position>> append_batch(
      std::span<const std::string_view> records);

  // Makes everything appended before the call durable.
  [[nodiscard]] Result<void> sync();

  // ---- Many appends in flight from few threads ----
  // Called exactly once per append_async() that returned a position: with
  // that position once the record and everything before it is durable, or
  // with the error if the log fails or closes first (after a failed sync
  // every pending callback gets Errc::failed, even one whose record had
  // become durable). Runs on one thread of the log, one callback at a time,
  // in position order, never under a lock that appenders take. It must be
  // short and must not wait on the log: no append() or sync() in batch or
  // group mode, no wait_durable(). append_async() is fine. close() from a
  // callback returns Errc::invalid_argument (the log stays open); destroying
  // the Log from a callback cannot wait for the callback thread either and
  // aborts the process, saying so on stderr. A
  // callback should not throw; one that does is caught, the callbacks after
  // it still run, and stats() counts it (callback_exceptions, with the
  // first one's what() in callback_error).
  using Completion = std::function<void(Result<Position>)>;
  // Appends like append() but returns at once in every mode with where the
  // record starts (periodic mode still blocks while the syncer lags past
  // lag_bound, as append() does). `done`, if given, is called as above.
  // In batch mode the log's thread leads the sync such appends need.
  [[nodiscard]] Result<Position> append_async(std::span<const std::byte> record,
                                              Completion done = {});
  [[nodiscard]] Result<Position> append_async(std::string_view record, Completion done = {}) {
    return append_async(std::as_bytes(std::span(record.data(), record.size())), std::move(done));
  }
  // append_batch() that returns at once, as append_async() does; `done`, if
  // given, is called once for the whole batch, with its first record's
  // position, when every record of it is durable (or with the error).
  [[nodiscard]] Result<std::vector<Position>> append_batch_async(
      std::span<const std::span<const std::byte>> records, Completion done = {});
  [[nodiscard]] Result<std::vector<Position>> append_batch_async(
      std::span<const std::string_view> records, Completion done = {});
  // Waits until the record at `pos` (a position append() or append_async()
  // returned) is durable. Errc::timeout once `timeout` passes (the record
  // may still become durable), Errc::failed after a failed sync,
  // Errc::closed if the log closed first, Errc::invalid_argument for a
  // position past everything appended. Any thread; in batch mode it asks
  // the log's thread for the sync, never leading one itself.
  [[nodiscard]] Result<void> wait_durable(Position pos, std::chrono::nanoseconds timeout);
  // A non-blocking eventfd that becomes readable whenever durable()
  // advances, the log fails or it closes: an epoll or io_uring loop drives
  // the log with it and no extra thread. Read its 8 bytes to re-arm it,
  // then look at durable() (a wake-up may bring nothing new). Made at the
  // first call; the log owns it (never close it) until the Log is destroyed.
  [[nodiscard]] Result<int> durable_fd();

  // Every record starting before this position is durable.
  Position durable() const;

  // Lets go of every segment that lies wholly before `pos` and is durable:
  // recycled or deleted per config. Records before it may no longer be read.
  // With archiving, only the ones archived already: the others, from the
  // oldest not archived on, stay and are listed in the report's
  // `unarchived`.
  // Says what it let go; nothing (an empty report) is not an error. On an
  // error the segments not yet released stay (segments() lists them). The
  // report's `oldest` costs a short read of the new oldest segment; if that
  // read fails (damage found there), the error is returned although the
  // release itself happened.
  [[nodiscard]] Result<ReleaseReport> release_before(Position pos);

  // Every segment file of the directory, oldest log segment first, then
  // files waiting to be recycled, then spares (a spare still being made
  // appears once ready). Finding each segment's first and last record reads
  // the log: the first call reads all of it, like a replay; later calls
  // read on only in segments not yet wholly before the durable position at
  // the previous call. States: see SegmentState; docs/operations.md.
  [[nodiscard]] Result<std::vector<SegmentInfo>> segments() const;
  // Sum of the sizes of all segment files: the log, spares and files
  // waiting to be recycled. Reads no file.
  uint64_t disk_bytes() const;
  // The position of the first record read() returns (the oldest record the
  // log still holds), or none while it holds no durable record. Reads the
  // oldest segment up to that record.
  [[nodiscard]] Result<std::optional<Position>> oldest() const;

  // A reader from `from` (the first record at or after it) to durable().
  // From a position append() returned or a Record carried, it starts at that
  // record without reading the segment before it; from any other position
  // it walks the segment from its first record. Readers hold a window of a
  // segment (1 MiB, or the record if larger), never the whole file.
  // A `from` in a segment below the oldest one the log holds (released) is
  // Errc::released: its records are gone, and the reader never silently
  // starts later. Position() means the start of the log.
  [[nodiscard]] Result<Reader> read(Position from = {}) const;
  // A tailer from `from`: the records read() would give, then each new one
  // as it becomes durable; a released `from` is Errc::released, as for read().
  [[nodiscard]] Result<Tailer> tail(Position from = {}) const;

  const RecoveryReport& recovery() const;
  // The backend in use, e.g. "uring"; for backend=auto also why it was chosen.
  const std::string& backend() const;
  // The direct I/O alignment in use (probed or configured); 0 for mmap.
  uint32_t block_size() const;
  Stats stats() const;
  const Config& config() const;

  // Syncs what was appended, writes a final marker, stops the threads.
  [[nodiscard]] Result<void> close();

  struct Impl;

 private:
  explicit Log(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace synclog
