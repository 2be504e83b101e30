// The Log facade's state: wires recovery, the segment manager, the appender,
// the backend and the sync driver. No I/O logic lives here.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/file.h"
#include "log/archiver.h"
#include "log/cdc.h"
#include "log/completions.h"
#include "log/dir_lock.h"
#include "metrics/metrics.h"
#include "segments/appender.h"
#include "segments/manager.h"
#include "segments/recovery.h"
#include "segments/transform.h"
#include "sync/backend.h"
#include "sync/driver.h"
#include "synclog/log.h"

namespace synclog {

// Hidden in libsynclog.so: an internal of the exported Log.
struct __attribute__((visibility("hidden"))) Log::Impl {
  // The manager's thread may call into the driver (on_failure): it ends
  // before any member is destroyed.
  ~Impl() {
    if (manager) (void)manager->stop();
  }
  Config config;
  DirLock lock;  // first member: released after everything else
  RecoveryReport report;
  std::vector<seg::Extent> recovered;  // earlier sessions' replayable bytes
  // Master keys (null without encryption); readers share it and may
  // outlive the log.
  std::shared_ptr<seg::Keyring> keys;
  std::unique_ptr<seg::SegmentManager> manager;
  std::unique_ptr<seg::Appender> appender;
  std::unique_ptr<sync::Backend> backend;
  // syncs_in_flight > 1: one more backend per further sync in flight.
  std::vector<std::unique_ptr<sync::Backend>> more_backends;
  std::string backend_description;
  uint32_t block_size = 0;
  std::unique_ptr<sync::Driver> driver;
  std::unique_ptr<Completions> completions;  // after driver: destroyed first
  metrics::Metrics metrics;
  std::atomic<bool> closing{false};
  bool closed = false;
  mutable std::mutex release_mu;

  // Log::segments()' first and last record per segment id. A segment wholly
  // before the durable position when it was read never changes again (ids
  // are never reused), so it is read once; the others are read on from
  // their last record.
  struct Bounds {
    std::optional<Position> first;
    std::optional<Position> last;
    bool complete = false;
  };
  mutable std::mutex bounds_mu;
  mutable std::map<uint64_t, Bounds> bounds;

  // Null without archiving. After the driver and manager it reads: destroyed
  // first.
  std::unique_ptr<Archiver> archiver;
  // Null without cdc_dir. Like the archiver: destroyed first.
  std::unique_ptr<Cdc> cdc;

  std::vector<seg::Extent> readable_extents() const;
  // The first segment id of this session: segments below it that the log
  // does not hold were released (or lost before this open).
  uint64_t first_new_id = 0;
  // Errc::released if `from` lies in a segment below every segment the
  // log holds: its records are gone, and a reader must not silently start
  // at the oldest record left. Position() (segment 0) means the start.
  [[nodiscard]] Result<void> check_not_released(Position from) const;
  // Whether `bytes` of record payload (`what`: "record", "batch of 3
  // records") may be appended now: its size, and a log neither closed nor
  // failed. The error names the problem.
  [[nodiscard]] Result<void> admit(uint64_t bytes, const std::string& what,
                                   bool whole = false) const;

  // One framed record (a data record or a batch) for write().
  struct Write {
    seg::Kind kind = seg::Kind::data;
    std::span<const std::span<const std::byte>> pieces;
    uint64_t records = 1;  // user records it holds, and their bytes: the metrics
    uint64_t bytes = 0;
    bool async = false;          // return once written, without waiting
    Completion* done = nullptr;  // async only: taken when the record is placed
    uint32_t shown = 0;          // what `done` is told: the record's position plus this
    bool* packed = nullptr;      // batches: set if stored compressed (inner positions 16 + 8 i)
  };
  // Appends after admit(); waits as the mode says unless async.
  [[nodiscard]] Result<Position> write(const Write& w);
};

}  // namespace synclog
