// SegmentManager: owns the segment files of a log directory. A background
// thread keeps `spares` segments created (allocated, optionally zeroed,
// header written and synced, file and directory fsynced) so that appends
// never wait on file creation in steady state; released segments are
// recycled into spares or deleted; the total size of all segment files stays
// within the configured limit, which turns into back-pressure for take().
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "segments/segment.h"
#include "synclog/error.h"

namespace synclog::seg {

// The largest segment id: a Position keeps 32 bits of it, and the all-ones
// id is left unused so that no Position of a segment reaches UINT64_MAX.
// The manager makes no segment past it: appends then fail at once, naming
// the limit, instead of wrapping to positions before the log's start.
inline constexpr uint64_t kMaxSegmentId = (uint64_t{1} << 32) - 2;

// Whether an error making a segment is a shortage that may clear (a full
// disk or quota, too many open files): the manager then tries again and
// appends wait for it (Errc::no_space after allocation_timeout). Any other
// errno (EIO, EROFS, EUCLEAN...) says the filesystem can no longer be
// trusted: the log stops, as after a failed sync.
bool is_back_pressure(int sys_errno);

struct ManagerOptions {
  std::filesystem::path dir;
  uint64_t segment_size = 0;
  uint32_t spares = 1;
  bool recycle = true;
  bool prezero = true;
  uint64_t max_total_size = 0;  // 0 = unbounded
  uint32_t block_size = 4096;
  uint64_t log_id = 0;
  SegmentKind kind = SegmentKind::mmap;
  uint32_t file_perms = 0600;  // of the files it creates
  // Change data capture: each spare is linked here (with its index file)
  // before it is ready, so every segment that becomes active has its link.
  // Empty = off.
  std::filesystem::path cdc_dir;
  uint64_t cdc_max_size = 0;  // bytes of files in cdc_dir; 0 = unbounded
  // With encryption: the master key new segments are written under (its id
  // goes in their headers, a key derived from it encrypts their records).
  std::optional<MasterKey> key;
};

struct ManagerStats {
  uint64_t created = 0;
  uint64_t recycled = 0;
  uint64_t released = 0;
  uint64_t stalls = 0;  // take() calls that found no spare ready
  // take() calls that waited while cdc_dir was full (cdc_max_size).
  uint64_t cdc_blocked = 0;
  uint64_t cdc_linked = 0;  // segments linked into cdc_dir this session
  uint64_t cdc_bytes = 0;   // with cdc_max_size: bytes of files in cdc_dir when last counted
};

// A file the manager holds, as files() lists it.
struct FileInfo {
  enum class Role { log, recycling, spare };
  uint64_t id = 0;  // a recycling file's former id
  std::filesystem::path path;
  uint64_t size = 0;
  Role role = Role::log;
};

// What release() did with the segments it let go.
struct Released {
  std::vector<uint64_t> ids;
  uint32_t recycled = 0;
  uint64_t bytes_deleted = 0;
  uint64_t bytes_recycled = 0;
};

// An append's wait for a segment: it began at `since` (what its error
// reports, also when it waited behind another append first) and ends at
// `deadline`.
struct SpaceWait {
  std::chrono::steady_clock::time_point since;
  std::chrono::steady_clock::time_point deadline;
};

// Errc::no_space for a wait that ran out: "no segment available after
// waiting N ms: <why>".
[[nodiscard]] Error no_segment(const SpaceWait& wait, const std::string& why);

class SegmentManager {
 public:
  // `existing` lists the segment files recovery kept (id -> file size);
  // new segments get ids from `next_id` on.
  SegmentManager(ManagerOptions options, uint64_t next_id, std::map<uint64_t, uint64_t> existing);
  ~SegmentManager();

  void start();
  // Stops the thread and deletes the spares and unfinished recycles.
  [[nodiscard]] Result<void> stop();

  // The next segment, ready for appends. Waits until `deadline` when none is
  // ready (or only until a creation error, with fail_fast); then fails with
  // Errc::no_space naming the cause (the size limit or the creation error).
  // Once the log stopped (fail(), or a creation error that is not
  // back-pressure) it fails at once, also any call waiting, with that error.
  [[nodiscard]] Result<Segment*> take(const SpaceWait& wait, bool fail_fast = false);

  // The log stopped (a failed sync): `stopped` (Errc::failed) is what every
  // waiting and later take() gets, and no more spares are made. The first
  // call wins.
  void fail(Error stopped);
  // Called on the manager's thread with the error take() now gives, when
  // making a segment fails with an error that is not back-pressure
  // (is_back_pressure): the log must stop. If the log already stopped, it
  // is called at once with that error.
  void on_failure(std::function<void(const Error&)> callback);

  // Lets go of these segments (none may still be written or unsynced), which
  // must be the oldest ones: recycled into spares or deleted, oldest first.
  // The files leave their segment names before this returns, durably. On an
  // error the segments not yet released stay in the log, and a later call
  // retries from the oldest; after a failed directory fsync every later call
  // fails with that error.
  // `done` (if given) gets what was let go, also when it fails part-way.
  [[nodiscard]] Result<void> release(const std::vector<uint64_t>& ids, Released* done = nullptr);
  // release() deletes this segment instead of recycling it: a reader that
  // may still hold it open (an archive command a crashed process left
  // running) then keeps reading its bytes, never a spare's new ones.
  void never_recycle(uint64_t id) {
    std::lock_guard lock(mu_);
    never_recycle_ = id;
  }

  // Lets go of a complete, synced segment's file and image. A direct or
  // buffered segment's image (private memory as large as the file) is kept
  // for a later spare: mapping and faulting in 32 MiB took a spare 30 ms on
  // this machine, enough to make fast appenders wait for segments.
  void retire(Segment& segment);

  // Segments linked into cdc_dir this session with id >= `from`, ascending
  // (spares included: they are linked before they are ready).
  std::vector<uint64_t> cdc_linked_from(uint64_t from) const;

  // Ids of the segment files currently in the log (not spares), ascending.
  std::vector<uint64_t> segment_ids() const;
  uint64_t total_size() const;
  // The log's segment files (ascending), then files waiting to be recycled,
  // then ready spares. A spare still being made is not listed: its file is
  // a temporary one until it is ready.
  std::vector<FileInfo> files() const;
  ManagerStats stats() const;
  // Why no spare is ready, if the manager knows (the size limit, or the last
  // creation error); empty while one is simply being made.
  std::string spare_problem() const;

 private:
  struct Entry {
    uint64_t size = 0;
    std::unique_ptr<Segment> live;  // null for segments of earlier sessions
  };

  void run();
  // Makes one spare (new file or recycled one); called without the lock.
  Result<std::unique_ptr<Segment>> make_spare(uint64_t id, const std::filesystem::path* recycled);
  Result<void> write_header(const io::File& file, const SegmentHeader& header) const;
  std::filesystem::path path_of(uint64_t id) const;
  // Links segment `id` (already under its name in the log directory) into
  // cdc_dir with an index naming no durable record, and syncs cdc_dir.
  Result<void> link_cdc(uint64_t id);
  // Why no spare may be made under cdc_max_size: cdc_dir has no room for
  // one more segment, or it cannot be counted. Empty if it may (always
  // without a limit).
  std::string cdc_full();
  SegmentHeader header_for(uint64_t id) const {
    return SegmentHeader{id, opt_.segment_size, opt_.block_size, opt_.log_id};
  }

  const ManagerOptions opt_;
  mutable std::mutex mu_;
  std::condition_variable spare_ready_;  // take() waits on it
  std::condition_variable work_;         // the thread waits on it
  std::map<uint64_t, Entry> segments_;   // in the log, by id
  std::deque<std::unique_ptr<Segment>> spares_;
  struct Recycle {
    uint64_t old_id = 0;
    std::filesystem::path path;
  };
  std::deque<Recycle> to_recycle_;
  std::vector<std::unique_ptr<Segment>> retired_;  // control blocks kept until close
  std::mutex images_mu_;                           // images_ only
  std::vector<io::Mapping> images_;                // at most spares + 1
  uint64_t next_id_;
  uint64_t total_size_ = 0;
  std::string last_error_;
  std::optional<Error> release_failure_;  // a failed directory fsync in release()
  std::optional<Error> failure_;          // the log stopped: take() fails with this
  std::function<void(const Error&)> on_failure_;
  uint32_t pending_recycles_ = 0;     // renames in flight in release()
  uint64_t never_recycle_ = 0;        // 0: none
  bool ids_exhausted_ = false;        // next_id_ is past kMaxSegmentId: permanent
  bool cdc_waiting_ = false;          // no spare is made until cdc_dir has room
  std::vector<uint64_t> cdc_linked_;  // this session's links, ascending
  ManagerStats stats_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace synclog::seg
