// Cdc: a thread of the log that keeps the CDC index files of this
// session's linked segments (segments/cdc_index.h) in step with durable():
// the segment holding the durable position gets its offset, earlier ones
// are marked complete. It follows the driver's generation word like the
// completion thread, so it never runs on the append or sync path; each
// rewrite costs it one small fdatasync, and it coalesces the syncs that
// published while it wrote. The SegmentManager links the segments (before
// they can become active); this thread never links or deletes anything.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "segments/cdc_index.h"
#include "segments/manager.h"
#include "segments/recovery.h"
#include "sync/driver.h"

namespace synclog {

struct CdcOptions {
  std::filesystem::path cdc_dir;
  uint64_t segment_size = 0;
  uint64_t first_new_id = 0;  // this session's segments start here
  uint32_t file_perms = 0600;
};

// Log::open, before anything else touches cdc_dir: it must exist and be
// writable, must be neither the log directory nor inside it, and a hard
// link from the log directory into it must work (`probe_from`, a file in
// the log directory, is linked and unlinked): anything else is an error
// naming config key 'cdc_dir'.
[[nodiscard]] Result<void> check_cdc_dir(const Config& config,
                                         const std::filesystem::path& probe_from);

// Log::open, after recovery and before the new session links anything.
// Stale names go first, durably (a consumer moving on from a segment
// completed here must not land on a link about to disappear): leftover
// temp indexes, and links past the recovered log (below). Then earlier
// sessions' segments still linked get a complete index (their
// recovered end, or the file's end for segments the log released);
// links of segments past the recovered log (spares of a crashed session,
// discarded segments) are removed with their indexes, unless an index
// claims durable records there (then Errc::bad_directory: it holds
// records this log does not have).
[[nodiscard]] Result<void> settle_cdc_dir(const Config& config, const seg::Recovered& rec);

class Cdc {
 public:
  Cdc(CdcOptions options, const seg::SegmentManager& manager, sync::Driver& driver);
  ~Cdc();

  void start();
  // Stops the thread. With `sealed` (the driver closed cleanly: the last
  // segment ends in a durable end record) that segment is marked complete
  // too; else the next open marks it.
  void stop(bool sealed);

  // The last failed index write (empty once one succeeds).
  std::string last_error() const;

 private:
  void run();
  // One pass over the linked segments; `sealed` as for stop().
  void update(bool sealed);

  const CdcOptions opt_;
  const seg::SegmentManager& manager_;
  sync::Driver& driver_;
  std::atomic<bool> stopping_{false};
  // The thread's (then stop()'s): what each unfinished segment's index says.
  std::map<uint64_t, seg::CdcIndex> written_;
  uint64_t next_ = 0;  // segments below are marked complete
  mutable std::mutex mu_;
  std::string last_error_;
  std::thread thread_;
};

}  // namespace synclog
