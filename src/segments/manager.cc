#include "segments/manager.h"

#include <algorithm>
#include <cerrno>
#include <vector>

#include "io/links.h"
#include "segments/cdc_index.h"

namespace synclog::seg {
namespace {
constexpr auto kRetryDelay = std::chrono::milliseconds(50);
constexpr size_t kZeroChunk = 1 << 20;
}  // namespace

bool is_back_pressure(int sys_errno) {
  return sys_errno == ENOSPC || sys_errno == EDQUOT || sys_errno == EMFILE || sys_errno == ENFILE;
}

SegmentManager::SegmentManager(ManagerOptions options, uint64_t next_id,
                               std::map<uint64_t, uint64_t> existing)
    : opt_(std::move(options)), next_id_(next_id) {
  for (auto [id, size] : existing) {
    segments_[id].size = size;
    total_size_ += size;
  }
}

SegmentManager::~SegmentManager() { (void)stop(); }

void SegmentManager::start() {
  thread_ = std::thread([this] { run(); });
}

std::filesystem::path SegmentManager::path_of(uint64_t id) const {
  return opt_.dir / segment_file_name(id);
}

Result<void> SegmentManager::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return {};
    stopping_ = true;
  }
  work_.notify_all();
  spare_ready_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Spares hold no records: deleting them loses nothing.
  Result<void> result;
  std::lock_guard lock(mu_);
  bool removed = false;
  bool cdc_removed = false;
  for (auto& s : spares_) {
    s->retire();
    if (!opt_.cdc_dir.empty()) {
      // The next session reuses a deleted spare's id: its link and index
      // must go too. The index first: a link without one names nothing
      // durable to a consumer.
      for (const auto& name : {cdc_index_name(s->id()), segment_file_name(s->id())}) {
        auto r = io::remove_file(opt_.cdc_dir / name);
        if (!r && r.error().sys_errno != ENOENT && result) result = r;
      }
      cdc_removed = true;
    }
    auto r = io::remove_file(s->path());
    if (!r && result) result = r;
    total_size_ -= s->size();
    retired_.push_back(std::move(s));
    removed = true;
  }
  spares_.clear();
  for (auto& r_file : to_recycle_) {
    auto r = io::remove_file(r_file.path);
    if (!r && result) result = r;
    total_size_ -= opt_.segment_size;
    removed = true;
  }
  to_recycle_.clear();
  if (removed) {
    auto r = io::sync_dir(opt_.dir);
    if (!r && result) result = r;
  }
  if (cdc_removed) {
    auto r = io::sync_dir(opt_.cdc_dir);
    if (!r && result) result = r;
  }
  return result;
}

Result<void> SegmentManager::write_header(const io::File& file, const SegmentHeader& h) const {
  std::byte header[kHeaderSize];
  encode_header(h, header);
  return file.write_at(0, header);
}

Result<std::unique_ptr<Segment>> SegmentManager::make_spare(uint64_t id,
                                                            const std::filesystem::path* recycled) {
  // A recycled file keeps its old records, but their checksums name the old
  // id (F2), so they never replay under the new one.
  const auto tmp = recycled ? *recycled : opt_.dir / (segment_file_name(id) + ".tmp");
  // The temp name must be gone before the next attempt, whose O_EXCL open
  // would otherwise fail with EEXIST in place of the cause. If it cannot be
  // removed, the error stops the log whatever the first cause was, and
  // still begins with that cause.
  auto fail = [&](Error e) -> Result<std::unique_ptr<Segment>> {
    if (!recycled) {
      if (auto gone = io::remove_file(tmp); !gone && gone.error().sys_errno != ENOENT) {
        e.message += "; then removing it failed: " + gone.error().message;
        if (is_back_pressure(e.sys_errno)) e.sys_errno = gone.error().sys_errno;
      }
    }
    return std::unexpected(std::move(e));
  };
  // An encrypted segment's key is derived from its id and log id; its
  // random salt makes its nonces differ from any earlier file that had the
  // same id (one discarded by recovery, or a copy of the directory).
  SegmentHeader header = header_for(id);
  std::optional<SegmentCipher> cipher;
  if (opt_.key) {
    auto salt = random_salt();
    if (!salt) return std::unexpected(salt.error());
    auto key = derive_segment_key(opt_.key->bytes.bytes(), opt_.log_id, id);
    if (!key) return std::unexpected(key.error());
    header.encrypted = true;
    header.key_id = opt_.key->id;
    header.salt = *salt;
    header.key_check = key_check_value(*key);
    if (header.key_check == 0) {
      return make_error(Errc::unsupported, "libcrypto failed to compute a key check value");
    }
    cipher = SegmentCipher{*key, id, *salt};
  }
  auto file = io::File::open(
      tmp, recycled ? io::File::Mode::read_write : io::File::Mode::create_new, opt_.file_perms);
  // A failed open created nothing to remove (EEXIST: a file this call did
  // not make).
  if (!file) return std::unexpected(file.error());
  if (recycled) {
    // Made by an earlier version or under group_read: no wider than the
    // files created now.
    if (auto r = file->restrict_perms(opt_.file_perms); !r) return fail(r.error());
  } else {
    // Real blocks, not a sparse file: an mmap store can then never SIGBUS on
    // a full disk, and zeroed blocks make later syncs overwrites.
    if (auto r = file->allocate(opt_.segment_size); !r) return fail(r.error());
    if (opt_.prezero) {
      std::vector<std::byte> zeros(kZeroChunk);
      for (uint64_t off = 0; off < opt_.segment_size; off += kZeroChunk) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(kZeroChunk, opt_.segment_size - off));
        if (auto r = file->write_at(off, std::span(zeros).first(n)); !r) return fail(r.error());
      }
    }
  }
  if (auto r = write_header(*file, header); !r) return fail(r.error());
  if (auto r = file->datasync(); !r) return fail(r.error());
  file->close();
  if (auto r = io::rename_file(tmp, path_of(id)); !r) return fail(r.error());
  if (auto r = io::sync_dir(opt_.dir); !r) return std::unexpected(r.error());
  if (!opt_.cdc_dir.empty()) {
    if (auto r = link_cdc(id); !r) {
      // Not made: the id is tried again with a new file.
      if (auto gone = io::remove_file(path_of(id)); gone) (void)io::sync_dir(opt_.dir);
      return std::unexpected(r.error());
    }
  }
  auto seg = std::make_unique<Segment>(id, opt_.segment_size, path_of(id));
  if (cipher) seg->set_cipher(*cipher);
  io::Mapping image;
  if (opt_.kind != SegmentKind::mmap) {
    std::lock_guard lock(images_mu_);
    if (!images_.empty()) {
      image = std::move(images_.back());
      images_.pop_back();
    }
  }
  if (auto r = seg->open_image(opt_.kind, header, std::move(image)); !r) {
    return std::unexpected(r.error());
  }
  return seg;
}

Result<void> SegmentManager::link_cdc(uint64_t id) {
  const auto link = opt_.cdc_dir / segment_file_name(id);
  const auto index = opt_.cdc_dir / cdc_index_name(id);
  // A link at this id can only be left by an earlier failed attempt at it
  // (opening removed every link past the recovered log): it names an old
  // file, never a record.
  if (auto r = io::remove_file(link); !r && r.error().sys_errno != ENOENT) return r;
  // The index first: a consumer that sees the link finds it naming only
  // the header as durable.
  if (auto r = store_cdc_index(opt_.cdc_dir, id, CdcIndex{kHeaderSize, false}, opt_.file_perms); !r)
    return r;
  auto linked = io::link_file(path_of(id), link);
  if (linked) linked = io::sync_dir(opt_.cdc_dir);
  if (!linked) {
    // Undone, so that the next attempt at this id (a new file) can link
    // again; a name that stays (this removal failing too, or lost by a
    // crash) is removed by that attempt or by the next open.
    for (const auto& path : {link, index}) (void)io::remove_file(path);
    return make_error(linked.error().code, "change data capture: " + linked.error().message,
                      linked.error().sys_errno);
  }
  std::lock_guard lock(mu_);
  cdc_linked_.push_back(id);
  ++stats_.cdc_linked;
  return {};
}

std::string SegmentManager::cdc_full() {
  if (opt_.cdc_dir.empty() || opt_.cdc_max_size == 0) return {};
  auto used = io::dir_file_bytes(opt_.cdc_dir);
  // Without a count the limit cannot be kept: no spare until one works.
  if (!used) return "change data capture: cannot count cdc_dir: " + used.error().message;
  {
    std::lock_guard lock(mu_);
    stats_.cdc_bytes = *used;
  }
  if (*used + opt_.segment_size <= opt_.cdc_max_size) return {};
  return "change data capture: cdc_dir " + opt_.cdc_dir.string() + " holds " +
         std::to_string(*used) + " bytes of cdc_max_size " + std::to_string(opt_.cdc_max_size) +
         ", no room for another segment of " + std::to_string(opt_.segment_size) +
         " until the CDC consumer deletes the segments it has consumed";
}

std::vector<uint64_t> SegmentManager::cdc_linked_from(uint64_t from) const {
  std::lock_guard lock(mu_);
  std::vector<uint64_t> out;
  for (uint64_t id : cdc_linked_)
    if (id >= from) out.push_back(id);
  return out;
}

void SegmentManager::retire(Segment& segment) {
  io::Mapping image = segment.retire();
  if (image.bytes().empty()) return;
  std::lock_guard lock(images_mu_);
  if (images_.size() <= opt_.spares) images_.push_back(std::move(image));
}

void SegmentManager::run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const bool want_spare = spares_.size() < opt_.spares;
    if (!want_spare || failure_) {
      work_.wait(lock);
      continue;
    }
    if (next_id_ > kMaxSegmentId) {
      ids_exhausted_ = true;
      last_error_ = "segment id " + std::to_string(next_id_) +
                    " would exceed the largest a position can hold (" +
                    std::to_string(kMaxSegmentId) +
                    " = 2^32-2): this log has used up its segment ids; copy what is still "
                    "needed into a new log";
      spare_ready_.notify_all();
      work_.wait(lock);
      continue;
    }
    if (!opt_.cdc_dir.empty()) {
      lock.unlock();
      std::string full = cdc_full();
      lock.lock();
      if (stopping_) break;
      cdc_waiting_ = !full.empty();
      if (cdc_waiting_) {
        // Only the consumer frees room, and nothing tells the log when: look
        // again shortly.
        last_error_ = std::move(full);
        spare_ready_.notify_all();
        work_.wait_for(lock, kRetryDelay);
        continue;
      }
    }
    std::filesystem::path recycled;
    const bool recycling = !to_recycle_.empty();
    if (recycling) {
      recycled = std::move(to_recycle_.front().path);
      to_recycle_.pop_front();
    } else if (opt_.max_total_size != 0 && total_size_ + opt_.segment_size > opt_.max_total_size) {
      last_error_ = "segment files use " + std::to_string(total_size_) + " of max_total_size " +
                    std::to_string(opt_.max_total_size) + " bytes";
      work_.wait(lock);
      continue;
    } else {
      total_size_ += opt_.segment_size;
    }
    // The id is not consumed until the spare exists, so a session's
    // segments stay consecutive even when creation fails and is retried.
    const uint64_t id = next_id_;
    lock.unlock();
    auto seg = make_spare(id, recycling ? &recycled : nullptr);
    lock.lock();
    if (!seg) {
      Error e = std::move(seg.error());
      // Never retry on the same file: after a failed fdatasync its state is
      // unknown (fsyncgate). A new file is made from scratch next time.
      total_size_ -= opt_.segment_size;
      if (recycling) {
        lock.unlock();
        for (const auto& p : {recycled, path_of(id)}) {
          auto gone = io::remove_file(p);
          if (!gone && gone.error().sys_errno != ENOENT) {
            e.message += "; then removing it failed: " + gone.error().message;
            if (is_back_pressure(e.sys_errno)) e.sys_errno = gone.error().sys_errno;
          }
        }
        lock.lock();
      }
      if (!is_back_pressure(e.sys_errno)) {
        // Not a shortage that may clear: the filesystem failed (EIO), went
        // read-only (EROFS) or was shut down. Waiting would only turn that
        // into no_space later; the log stops now, as after a failed sync.
        const Error stopped{Errc::failed,
                            "the log stopped after a failed segment creation; nothing later is "
                            "acknowledged: " +
                                e.message,
                            e.sys_errno};
        last_error_ = e.message;
        auto tell = on_failure_;
        lock.unlock();
        // The driver first, then the appenders waiting here: none of them
        // may see the log stopped while a sync() still succeeds. (The
        // driver's stop also calls fail(); a second call changes nothing.)
        if (tell) tell(stopped);
        fail(stopped);
        lock.lock();
        // A callback registered after `tell` was read missed the failure
        // unless it saw failure_ set; telling the driver twice is harmless.
        if (!tell && on_failure_) {
          auto late = on_failure_;
          lock.unlock();
          late(stopped);
          lock.lock();
        }
        continue;
      }
      last_error_ = e.message;
      spare_ready_.notify_all();
      work_.wait_for(lock, kRetryDelay);
      continue;
    }
    ++next_id_;
    ++(recycling ? stats_.recycled : stats_.created);
    last_error_.clear();
    spares_.push_back(std::move(*seg));
    spare_ready_.notify_all();
  }
}

Error no_segment(const SpaceWait& wait, const std::string& why) {
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - wait.since);
  return Error{Errc::no_space, "no segment available after waiting " +
                                   std::to_string(waited.count()) + " ms: " + why};
}

Result<Segment*> SegmentManager::take(const SpaceWait& wait, bool fail_fast) {
  std::unique_lock lock(mu_);
  if (failure_) return std::unexpected(*failure_);
  if (spares_.empty()) {
    ++stats_.stalls;
    const bool cdc_blocked = cdc_waiting_;
    work_.notify_one();
    spare_ready_.wait_until(lock, wait.deadline, [&] {
      return !spares_.empty() || stopping_ || ids_exhausted_ || failure_ ||
             (fail_fast && !last_error_.empty());
    });
    if (failure_) return std::unexpected(*failure_);
    // Also when the manager found cdc_dir full only after this call began.
    if (cdc_blocked || cdc_waiting_) ++stats_.cdc_blocked;
    if (spares_.empty()) {
      return std::unexpected(
          no_segment(wait, last_error_.empty() ? "no spare segment was ready" : last_error_));
    }
  }
  auto seg = std::move(spares_.front());
  spares_.pop_front();
  Segment* raw = seg.get();
  Entry& e = segments_[raw->id()];
  e.size = raw->size();
  e.live = std::move(seg);
  work_.notify_one();
  return raw;
}

void SegmentManager::fail(Error stopped) {
  {
    std::lock_guard lock(mu_);
    if (failure_) return;
    failure_ = std::move(stopped);
  }
  spare_ready_.notify_all();
  work_.notify_all();
}

void SegmentManager::on_failure(std::function<void(const Error&)> callback) {
  std::optional<Error> already;
  {
    std::lock_guard lock(mu_);
    on_failure_ = callback;
    already = failure_;
  }
  if (already && callback) callback(*already);
}

Result<void> SegmentManager::release(const std::vector<uint64_t>& ids, Released* done) {
  // Oldest first, each made durable before the next: a crash can then only
  // leave a shorter released prefix, never a hole in the middle of the log.
  // A segment leaves the list only once its file is gone from its name, so
  // after a failed rename or unlink (nothing changed) a later call starts
  // again from it. A failed directory fsync leaves the directory's state
  // unknown, and a retried fsync may report success for changes that were
  // lost (as with data): releasing stops for the rest of the session.
  // A file queued for recycling gets a new header only after its rename
  // away from its old name is durable.
  std::vector<uint64_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  for (uint64_t id : sorted) {
    bool recycle = false;
    {
      std::lock_guard lock(mu_);
      if (release_failure_) return std::unexpected(*release_failure_);
      auto it = segments_.find(id);
      if (it == segments_.end()) continue;
      if (it != segments_.begin()) {
        return make_error(Errc::invalid_argument, "segment " + std::to_string(id) +
                                                      " cannot be released before segment " +
                                                      std::to_string(segments_.begin()->first));
      }
      recycle = opt_.recycle && id != never_recycle_ && it->second.size == opt_.segment_size &&
                to_recycle_.size() + pending_recycles_ < opt_.spares;
      if (recycle) ++pending_recycles_;
    }
    const auto path = path_of(id);
    if (recycle) {
      // Recycling rewrites the file in place: with another name still on it
      // (a CDC link the consumer has not deleted, also one left from a
      // session with cdc_dir set, or an operator's hard link) that would
      // overwrite what is read through that name. Such a file is deleted
      // from the log instead; the other name keeps its bytes. The log makes
      // links only to new spares, so a count of 1 now stays safe.
      auto links = io::link_count(path);
      if (!links || *links != 1) {
        std::lock_guard lock(mu_);
        --pending_recycles_;
        recycle = false;
      }
    }
    const auto dest = opt_.dir / (std::to_string(id) + ".recycle.tmp");
    auto moved = recycle ? io::rename_file(path, dest) : io::remove_file(path);
    if (!moved) {
      std::lock_guard lock(mu_);
      if (recycle) --pending_recycles_;
      return moved;
    }
    auto synced = io::sync_dir(opt_.dir);
    std::lock_guard lock(mu_);
    if (recycle) --pending_recycles_;
    auto it = segments_.find(id);
    Entry e = std::move(it->second);
    segments_.erase(it);
    if (e.live) {
      e.live->retire();
      retired_.push_back(std::move(e.live));
    }
    ++stats_.released;
    if (done) done->ids.push_back(id);
    if (!synced) {
      // The file is gone from its name; whether that is durable is unknown.
      total_size_ -= e.size;
      if (done) done->bytes_deleted += e.size;
      if (recycle) (void)io::remove_file(dest);
      release_failure_ =
          Error{Errc::io_error,
                "releasing segments stopped for this session after a failed directory fsync (the "
                "log directory's state is unknown until it is reopened): " +
                    synced.error().message,
                synced.error().sys_errno};
      return std::unexpected(*release_failure_);
    }
    if (recycle) {
      to_recycle_.push_back(Recycle{id, dest});
      if (done) {
        ++done->recycled;
        done->bytes_recycled += e.size;
      }
    } else {
      total_size_ -= e.size;
      if (done) done->bytes_deleted += e.size;
    }
  }
  work_.notify_one();
  return {};
}

std::vector<uint64_t> SegmentManager::segment_ids() const {
  std::lock_guard lock(mu_);
  std::vector<uint64_t> ids;
  for (auto& [id, e] : segments_) ids.push_back(id);
  return ids;
}

std::vector<FileInfo> SegmentManager::files() const {
  std::lock_guard lock(mu_);
  std::vector<FileInfo> out;
  for (const auto& [id, e] : segments_)
    out.push_back({id, path_of(id), e.size, FileInfo::Role::log});
  for (const auto& r : to_recycle_) {
    out.push_back({r.old_id, r.path, opt_.segment_size, FileInfo::Role::recycling});
  }
  for (const auto& s : spares_)
    out.push_back({s->id(), s->path(), s->size(), FileInfo::Role::spare});
  return out;
}

uint64_t SegmentManager::total_size() const {
  std::lock_guard lock(mu_);
  return total_size_;
}

std::string SegmentManager::spare_problem() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

ManagerStats SegmentManager::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace synclog::seg
