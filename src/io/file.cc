#include "io/file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "io/eintr.h"
#include "io/hook.h"

namespace synclog::io {

std::unexpected<Error> sys_error(const std::string& what, const std::filesystem::path& path,
                                 int err) {
  Errc code = (err == ENOSPC || err == EDQUOT) ? Errc::no_space : Errc::io_error;
  return make_error(code, what + " " + path.string() + ": " + std::strerror(err), err);
}

File& File::operator=(File&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

File::~File() { close(); }

void File::close() {
  if (fd_ >= 0) {
    // close() after a successful fdatasync cannot lose data; errors here are
    // only reported by the sync that preceded it.
    ::close(fd_);
    fd_ = -1;
  }
}

Result<File> File::open(const std::filesystem::path& path, Mode mode, uint32_t perms) {
  int flags = O_CLOEXEC | (mode == Mode::read_following_links ? 0 : O_NOFOLLOW);
  switch (mode) {
    case Mode::read:
    case Mode::read_following_links:
      flags |= O_RDONLY;
      break;
    case Mode::read_write:
      flags |= O_RDWR;
      break;
    case Mode::create_new:
      flags |= O_RDWR | O_CREAT | O_EXCL;
      break;
    case Mode::create_or_open:
      flags |= O_RDWR | O_CREAT;
      break;
    case Mode::direct:
      flags |= O_RDWR | O_DIRECT;
      break;
  }
  Event event{Op::open, path};
  event.open_flags = flags;
  if (int err = access_fault(event); err != 0) return sys_error("open", path, err);
  int fd = -1;
  const int open_err = restarting([&] {
    fd = ::open(path.c_str(), flags, static_cast<mode_t>(perms));
    return fd >= 0 ? 0 : errno;
  });
  errno = open_err;
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP && (flags & O_NOFOLLOW) != 0) {
      return make_error(Errc::bad_directory,
                        "open " + path.string() +
                            ": is a symbolic link; log files must be regular files in the log "
                            "directory",
                        err);
    }
    return sys_error("open", path, err);
  }
  File f;
  f.fd_ = fd;
  f.path_ = path;
  return f;
}

Result<size_t> File::read_at(uint64_t offset, std::span<std::byte> buf) const {
  if (int err = access_fault(Event{Op::read, path_, offset, buf.size()}); err != 0) {
    return sys_error("pread", path_, err);
  }
  size_t done = 0;
  while (done < buf.size()) {
    ssize_t n = ::pread(fd_, buf.data() + done, buf.size() - done, offset + done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("pread", path_, errno);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

Result<void> File::write_at(uint64_t offset, std::span<const std::byte> buf) const {
  // pwrite returning 0 for a non-empty buffer is neither progress nor an
  // error: a few retries, then it fails instead of looping forever.
  constexpr int kMaxZeroWrites = 3;
  int zero = 0;
  size_t done = 0;
  int err = hooked(Event{Op::write, path_, offset, buf.size(), buf.data()}, [&] {
    while (done < buf.size()) {
      ssize_t n = ::pwrite(fd_, buf.data() + done, buf.size() - done, offset + done);
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno;
      }
      if (Hook* h = current_hook()) {
        const Event e{Op::write, path_, offset + done, buf.size() - done, buf.data() + done};
        n = std::clamp<ssize_t>(static_cast<ssize_t>(h->written(e, n)), 0, n);
      }
      if (n == 0) {
        if (++zero > kMaxZeroWrites) return EIO;
        continue;
      }
      zero = 0;
      done += static_cast<size_t>(n);
    }
    return 0;
  });
  if (err != 0 && zero > kMaxZeroWrites) {
    return make_error(Errc::io_error,
                      "pwrite to " + path_.string() + " at offset " +
                          std::to_string(offset + done) + " wrote 0 bytes of the " +
                          std::to_string(buf.size() - done) + " left, " + std::to_string(zero) +
                          " times in a row",
                      EIO);
  }
  if (err != 0) return sys_error("pwrite", path_, err);
  return {};
}

Result<void> File::allocate(uint64_t size) const {
  // On tmpfs, fallocate gives up with EINTR when a signal arrives and undoes
  // what that call allocated: under frequent signals a large allocation
  // would never finish. Steps that halve on EINTR keep the progress made.
  constexpr uint64_t kMinStep = 1 << 16;
  int rc = hooked(Event{Op::allocate, path_, 0, size}, [&] {
    uint64_t at = 0;
    uint64_t step = size;
    int interrupts = 0;
    while (at < size) {
      const uint64_t len = std::min(step, size - at);
      const int r = ::posix_fallocate(fd_, static_cast<off_t>(at), static_cast<off_t>(len));
      if (r == EINTR && ++interrupts < kMaxInterrupts) {
        step = std::max(step / 2, kMinStep);
        continue;
      }
      if (r != 0) return r;
      at += len;
    }
    return 0;
  });
  if (rc != 0) return sys_error("fallocate", path_, rc);
  return {};
}

Result<void> File::datasync() const {
  int err = hooked(Event{Op::datasync, path_},
                   [&] { return restarting([&] { return ::fdatasync(fd_) == 0 ? 0 : errno; }); });
  if (err != 0) return sys_error("fdatasync", path_, err);
  return {};
}

Result<void> File::sync() const {
  int err = hooked(Event{Op::fsync, path_},
                   [&] { return restarting([&] { return ::fsync(fd_) == 0 ? 0 : errno; }); });
  if (err != 0) return sys_error("fsync", path_, err);
  return {};
}

Result<uint64_t> File::size() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return sys_error("fstat", path_, errno);
  return static_cast<uint64_t>(st.st_size);
}

Result<void> File::truncate(uint64_t size) const {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) return sys_error("ftruncate", path_, errno);
  return {};
}

Result<void> File::restrict_perms(uint32_t perms) const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return sys_error("fstat", path_, errno);
  const mode_t now = st.st_mode & 07777;
  if ((now & ~static_cast<mode_t>(perms)) == 0) return {};
  if (::fchmod(fd_, now & static_cast<mode_t>(perms)) != 0)
    return sys_error("fchmod", path_, errno);
  return {};
}

Result<void> File::lock_exclusive() const {
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    if (err == EWOULDBLOCK) {
      return make_error(
          Errc::bad_directory,
          "log directory is in use by another process (lock held on " + path_.string() + ")", err);
    }
    return sys_error("flock", path_, err);
  }
  return {};
}

Result<bool> File::locked_elsewhere() const {
  if (::flock(fd_, LOCK_SH | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) return true;
    return sys_error("flock", path_, err);
  }
  if (::flock(fd_, LOCK_UN) != 0) return sys_error("flock", path_, errno);
  return false;
}

Result<std::vector<std::string>> list_dir(const std::filesystem::path& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return sys_error("opendir", dir, errno);
  std::vector<std::string> names;
  errno = 0;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  int err = errno;
  ::closedir(d);
  if (err != 0) return sys_error("readdir", dir, err);
  return names;
}

Result<void> sync_dir(const std::filesystem::path& dir) {
  int fd = -1;
  errno = restarting([&] {
    fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return fd >= 0 ? 0 : errno;
  });
  if (fd < 0) return sys_error("open directory", dir, errno);
  int err = hooked(Event{Op::dir_sync, dir},
                   [&] { return restarting([&] { return ::fsync(fd) == 0 ? 0 : errno; }); });
  ::close(fd);
  if (err != 0) return sys_error("fsync directory", dir, err);
  return {};
}

Result<void> rename_file(const std::filesystem::path& from, const std::filesystem::path& to) {
  int err = hooked(Event{Op::rename, from, 0, 0, nullptr, &to},
                   [&] { return ::rename(from.c_str(), to.c_str()) == 0 ? 0 : errno; });
  // "rename <from> to <to>: <cause>"
  if (err != 0) return sys_error("rename " + from.string() + " to", to, err);
  return {};
}

Result<void> remove_file(const std::filesystem::path& path) {
  int err =
      hooked(Event{Op::remove, path}, [&] { return ::unlink(path.c_str()) == 0 ? 0 : errno; });
  if (err != 0) return sys_error("unlink", path, err);
  return {};
}

Result<void> check_writable_dir(const std::filesystem::path& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    int err = errno;
    return make_error(Errc::bad_directory,
                      "log directory " + dir.string() + " is not usable: " + std::strerror(err),
                      err);
  }
  if (!S_ISDIR(st.st_mode)) {
    return make_error(Errc::bad_directory, "log directory " + dir.string() + " is not a directory");
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    int err = errno;
    return make_error(Errc::bad_directory,
                      "log directory " + dir.string() + " is not writable: " + std::strerror(err),
                      err);
  }
  return {};
}

Result<bool> create_dir(const std::filesystem::path& dir, uint32_t perms) {
  bool created = true;
  if (::mkdir(dir.c_str(), static_cast<mode_t>(perms)) != 0) {
    if (errno != EEXIST) return sys_error("mkdir", dir, errno);
    created = false;
  }
  // Synced even if it existed: an earlier mkdir whose process died before
  // this sync left an entry that a power loss can still take away.
  const std::filesystem::path parent = dir.parent_path().empty() ? "." : dir.parent_path();
  if (auto r = sync_dir(parent); !r) return std::unexpected(r.error());
  return created;
}

int process_id() { return static_cast<int>(::getpid()); }

Result<bool> is_real_dir(const std::filesystem::path& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return sys_error("lstat", path, errno);
  return S_ISDIR(st.st_mode);
}

Result<bool> exists(const std::filesystem::path& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) return true;
  if (errno == ENOENT) return false;
  return sys_error("lstat", path, errno);
}

Result<void> remove_dir(const std::filesystem::path& dir) {
  if (::rmdir(dir.c_str()) != 0) return sys_error("rmdir", dir, errno);
  return {};
}

Result<void> replace_file(const std::filesystem::path& path, const std::filesystem::path& tmp,
                          std::span<const std::byte> bytes, uint32_t perms) {
  auto file = File::open(tmp, File::Mode::create_or_open, perms);
  if (!file) return std::unexpected(file.error());
  if (auto r = file->write_at(0, bytes); !r) return r;
  if (auto r = file->truncate(bytes.size()); !r) return r;
  if (auto r = file->datasync(); !r) return r;
  file->close();
  return rename_file(tmp, path);
}

}  // namespace synclog::io
