#include "log/dir_lock.h"

#include <cerrno>
#include <string>

#include "segments/segment.h"

namespace synclog {

namespace {

// The first line record_holder() wrote; empty if there is none.
std::string read_holder(const io::File& file) {
  std::string holder(32, '\0');
  auto n = file.read_at(0, std::as_writable_bytes(std::span(holder)));
  holder.resize(n ? *n : 0);
  if (auto nl = holder.find('\n'); nl != std::string::npos) holder.resize(nl);
  return holder;
}

}  // namespace

DirLock& DirLock::operator=(DirLock&& o) noexcept {
  if (this != &o) {
    undo();
    file_ = std::move(o.file_);
    created_ = std::exchange(o.created_, false);
    held_ = std::exchange(o.held_, false);
  }
  return *this;
}

DirLock::~DirLock() { undo(); }

void DirLock::undo() {
  if (!file_.is_open() || (!created_ && !held_)) return;
  // On a failed open only: the caller already returns the error that made
  // it fail. A LOCK left behind holds nothing (the next open reuses it);
  // the probe's block would only waste space and hide that no pid is in it.
  if (created_) {
    const std::filesystem::path path = file_.path();
    (void)io::remove_file(path);
  } else {
    (void)file_.truncate(0);
  }
  created_ = held_ = false;
  file_.close();
}

Result<DirLock> DirLock::acquire(const Config& config) {
  const std::filesystem::path path = config.dir / seg::kLockFileName;
  DirLock lock;
  auto file = io::File::open(path, io::File::Mode::create_new, config.file_perms());
  lock.created_ = file.has_value();
  if (!file && file.error().sys_errno == EEXIST) {
    file = io::File::open(path, io::File::Mode::create_or_open, config.file_perms());
  }
  if (!file) {
    return make_error(
        Errc::bad_directory,
        "log directory " + config.dir.string() + " is not writable: " + file.error().message,
        file.error().sys_errno);
  }
  lock.file_ = std::move(*file);
  auto locked = lock.file_.lock_exclusive();
  if (locked) {
    lock.held_ = true;
    return lock;
  }
  if (locked.error().sys_errno != EWOULDBLOCK) return std::unexpected(locked.error());
  lock.created_ = false;  // someone else's
  const std::string holder = read_holder(lock.file_);
  return make_error(Errc::bad_directory,
                    "log directory " + config.dir.string() + " is in use by another process (" +
                        (holder.starts_with("pid ") ? holder + " holds the lock on " + path.string()
                                                    : "lock held on " + path.string() +
                                                          "; the holder's pid is not recorded") +
                        ")",
                    EWOULDBLOCK);
}

Result<std::optional<std::string>> DirLock::probe(const std::filesystem::path& dir) {
  auto file = io::File::open(dir / seg::kLockFileName, io::File::Mode::read);
  if (!file) {
    if (file.error().sys_errno == ENOENT) return std::nullopt;
    return std::unexpected(file.error());
  }
  auto held = file->locked_elsewhere();
  if (!held) return std::unexpected(held.error());
  if (!*held) return std::nullopt;
  return read_holder(*file);
}

Result<void> DirLock::record_holder() const {
  const std::string text = "pid " + std::to_string(io::process_id()) + "\n";
  // Written over what is there, then cut: the block the file holds (the
  // direct I/O probe's) is never freed and needed again in between.
  auto written = file_.write_at(0, std::as_bytes(std::span(text)));
  if (!written) {
    // The pid is a courtesy to whoever finds the lock held; opening a full
    // disk must stay possible (only an open can release segments).
    const int err = written.error().sys_errno;
    if (err == ENOSPC || err == EDQUOT) return file_.truncate(0);
    return written;
  }
  return file_.truncate(text.size());
}

}  // namespace synclog
