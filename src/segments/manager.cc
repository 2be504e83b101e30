#include "segments/manager.h"

#include <algorithm>
#include <vector>

namespace synclog::seg {
namespace {
constexpr auto kRetryDelay = std::chrono::milliseconds(50);
constexpr size_t kZeroChunk = 1 << 20;
}  // namespace

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
  for (auto& s : spares_) {
    s->retire();
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
  return result;
}

Result<void> SegmentManager::write_header(const io::File& file, uint64_t id) const {
  std::byte header[kHeaderSize];
  encode_header(header_for(id), header);
  return file.write_at(0, header);
}

Result<std::unique_ptr<Segment>> SegmentManager::make_spare(uint64_t id,
                                                            const std::filesystem::path* recycled) {
  // A recycled file keeps its old records, but their checksums name the old
  // id (F2), so they never replay under the new one.
  const auto tmp = recycled ? *recycled : opt_.dir / (segment_file_name(id) + ".tmp");
  auto fail = [&](Error e) -> Result<std::unique_ptr<Segment>> {
    if (!recycled) (void)io::remove_file(tmp);
    return std::unexpected(std::move(e));
  };
  auto file = io::File::open(
      tmp, recycled ? io::File::Mode::read_write : io::File::Mode::create_new, opt_.file_perms);
  if (!file) return fail(file.error());
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
  if (auto r = write_header(*file, id); !r) return fail(r.error());
  if (auto r = file->datasync(); !r) return fail(r.error());
  file->close();
  if (auto r = io::rename_file(tmp, path_of(id)); !r) return fail(r.error());
  if (auto r = io::sync_dir(opt_.dir); !r) return std::unexpected(r.error());
  auto seg = std::make_unique<Segment>(id, opt_.segment_size, path_of(id));
  io::Mapping image;
  if (opt_.kind != SegmentKind::mmap) {
    std::lock_guard lock(images_mu_);
    if (!images_.empty()) {
      image = std::move(images_.back());
      images_.pop_back();
    }
  }
  if (auto r = seg->open_image(opt_.kind, header_for(id), std::move(image)); !r) {
    return std::unexpected(r.error());
  }
  return seg;
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
    if (!want_spare) {
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
      last_error_ = seg.error().message;
      spare_ready_.notify_all();
      // Never retry on the same file: after a failed fdatasync its state is
      // unknown (fsyncgate). A new file is made from scratch next time.
      total_size_ -= opt_.segment_size;
      if (recycling) {
        lock.unlock();
        (void)io::remove_file(recycled);
        (void)io::remove_file(path_of(id));
        lock.lock();
      }
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

Result<Segment*> SegmentManager::take(std::chrono::steady_clock::time_point deadline,
                                      bool fail_fast) {
  std::unique_lock lock(mu_);
  if (spares_.empty()) {
    ++stats_.stalls;
    work_.notify_one();
    const auto start = std::chrono::steady_clock::now();
    spare_ready_.wait_until(lock, deadline, [&] {
      return !spares_.empty() || stopping_ || ids_exhausted_ || (fail_fast && !last_error_.empty());
    });
    if (spares_.empty()) {
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start);
      std::string why = last_error_.empty() ? "no spare segment was ready" : last_error_;
      return make_error(Errc::no_space, "no segment available after waiting " +
                                            std::to_string(waited.count()) + " ms: " + why);
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
