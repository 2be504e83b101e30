// synclog: a commit log (write-ahead log) I/O engine.
//
//   auto log = synclog::Log::open(config);          // recovers what is there
//   for (auto r = log.value()->read(); ...)         // replay
//   auto pos = log.value()->append(bytes);           // durable on return in batch/group mode
//
// Thread safety: append(), sync(), durable(), stats() and read() may be
// called from any number of threads at once. release_before() may be called
// concurrently with appends. close() must not race with other calls; the
// destructor closes a log that is still open.
#pragma once

#include <chrono>
#include <cstddef>
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
  Position position;                // where the record starts; pass to release_before
  std::span<const std::byte> data;  // valid until the Reader's next call
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
  // under the reader, an I/O error, damage that appeared after open).
  [[nodiscard]] Result<std::optional<Record>> next();

  struct Impl;
  explicit Reader(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
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

  // Appends one record (1 byte to config.max_record_size()). In batch and
  // group mode it returns once the record is durable; in periodic mode at
  // once. After a sync failure every call returns Errc::failed.
  [[nodiscard]] Result<Position> append(std::span<const std::byte> record);
  [[nodiscard]] Result<Position> append(std::string_view record) {
    return append(std::as_bytes(std::span(record.data(), record.size())));
  }

  // Makes everything appended before the call durable.
  [[nodiscard]] Result<void> sync();

  // Every record starting before this position is durable.
  Position durable() const;

  // Lets go of every segment that lies wholly before `pos` and is durable:
  // recycled or deleted per config. Records before it may no longer be read.
  [[nodiscard]] Result<void> release_before(Position pos);

  // A reader from `from` (the first record at or after it) to durable().
  // From a position append() returned or a Record carried, it starts at that
  // record without reading the segment before it; from any other position
  // it walks the segment from its first record. Readers hold a window of a
  // segment (1 MiB, or the record if larger), never the whole file.
  [[nodiscard]] Result<Reader> read(Position from = {}) const;
  // A tailer from `from`: the records read() would give, then each new one
  // as it becomes durable.
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
