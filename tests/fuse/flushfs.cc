// flushfs: a passthrough FUSE filesystem (libfuse3) that remembers, per
// file, which byte ranges were written and not yet covered by an fsync or
// fdatasync reaching it. A test asks through an extended attribute:
// getxattr(file, "user.flushfs.unsynced") is "from-to from-to ..." (empty
// when everything written has been synced). Only an fsync request counts:
// a close (FUSE flush/release) makes nothing durable.
//
//   flushfs <backing-dir> <mountpoint> [fuse options]
//
// Faults for tests, from the environment:
//   FLUSHFS_RELEASE_DELAY_MS=n   each release sleeps n ms before closing, so
//                                a file unlinked right after close() is still
//                                open here and libfuse hides it as
//                                .fuse_hidden* (as a busy daemon would)
//   FLUSHFS_FAIL_DIRECT_OPEN=e   an open with O_DIRECT fails with errno e
#define FUSE_USE_VERSION 31
#include <dirent.h>
#include <fcntl.h>
#include <fuse.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string g_root;
int g_release_delay_ms = 0;
int g_fail_direct_open = 0;

// Written, not yet fsynced: start -> end, disjoint and merged; by the
// backing file's inode, since write and fsync get no path (nullpath_ok).
using Ranges = std::map<uint64_t, uint64_t>;
std::mutex g_mu;
std::map<ino_t, Ranges> g_unsynced;

std::string real(const char* path) { return g_root + path; }

void add_range(Ranges& r, uint64_t from, uint64_t to) {
  auto it = r.upper_bound(from);
  if (it != r.begin()) {
    auto prev = std::prev(it);
    if (prev->second >= from) {
      from = prev->first;
      to = std::max(to, prev->second);
      r.erase(prev);
    }
  }
  while (it != r.end() && it->first <= to) {
    to = std::max(to, it->second);
    it = r.erase(it);
  }
  r.emplace(from, to);
}

void clip_ranges(Ranges& r, uint64_t size) {
  for (auto it = r.begin(); it != r.end();) {
    if (it->first >= size) {
      it = r.erase(it);
    } else {
      if (it->second > size) it->second = size;
      ++it;
    }
  }
}

int neg_errno(int rc) { return rc < 0 ? -errno : rc; }

int fs_getattr(const char* path, struct stat* st, fuse_file_info* fi) {
  if (fi != nullptr) return neg_errno(::fstat(static_cast<int>(fi->fh), st));
  return neg_errno(::lstat(real(path).c_str(), st));
}

int fs_opendir(const char* path, fuse_file_info* fi) {
  DIR* d = ::opendir(real(path).c_str());
  if (d == nullptr) return -errno;
  fi->fh = reinterpret_cast<uint64_t>(d);
  return 0;
}

int fs_readdir(const char*, void* buf, fuse_fill_dir_t fill, off_t, fuse_file_info* fi,
               fuse_readdir_flags) {
  DIR* d = reinterpret_cast<DIR*>(fi->fh);
  ::rewinddir(d);
  while (dirent* e = ::readdir(d)) {
    struct stat st {};
    st.st_ino = e->d_ino;
    st.st_mode = static_cast<mode_t>(e->d_type) << 12;
    if (fill(buf, e->d_name, &st, 0, static_cast<fuse_fill_dir_flags>(0)) != 0) break;
  }
  return 0;
}

int fs_releasedir(const char*, fuse_file_info* fi) {
  ::closedir(reinterpret_cast<DIR*>(fi->fh));
  return 0;
}

int fs_mkdir(const char* path, mode_t mode) { return neg_errno(::mkdir(real(path).c_str(), mode)); }
int fs_rmdir(const char* path) { return neg_errno(::rmdir(real(path).c_str())); }

ino_t inode_of(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? st.st_ino : 0;
}

int fs_unlink(const char* path) {
  struct stat st {};
  const bool last = ::lstat(real(path).c_str(), &st) == 0 && st.st_nlink == 1;
  int rc = neg_errno(::unlink(real(path).c_str()));
  if (rc == 0 && last) {
    std::lock_guard lock(g_mu);
    g_unsynced.erase(st.st_ino);
  }
  return rc;
}

int fs_rename(const char* from, const char* to, unsigned int flags) {
  if (flags != 0) return -EINVAL;
  return neg_errno(::rename(real(from).c_str(), real(to).c_str()));
}

int fs_truncate(const char* path, off_t size, fuse_file_info* fi) {
  int fd = fi != nullptr ? static_cast<int>(fi->fh) : ::open(real(path).c_str(), O_WRONLY);
  if (fd < 0) return -errno;
  int rc = neg_errno(::ftruncate(fd, size));
  const ino_t ino = inode_of(fd);
  if (fi == nullptr) ::close(fd);
  if (rc != 0) return rc;
  std::lock_guard lock(g_mu);
  // Shrinking drops dirty bytes; growing adds zeros that are metadata until
  // synced, which a data check need not track.
  clip_ranges(g_unsynced[ino], static_cast<uint64_t>(size));
  return 0;
}

int open_backing(const char* path, fuse_file_info* fi, bool create, mode_t mode) {
  if ((fi->flags & O_DIRECT) != 0 && g_fail_direct_open != 0) return -g_fail_direct_open;
  // The backing file is opened buffered: durability is what this file
  // system is told (fsync), not what the backing medium does.
  int flags = fi->flags & ~O_DIRECT;
  int fd = create ? ::open(real(path).c_str(), flags | O_CREAT, mode)
                  : ::open(real(path).c_str(), flags);
  if (fd < 0) return -errno;
  fi->fh = static_cast<uint64_t>(fd);
  return 0;
}

int fs_open(const char* path, fuse_file_info* fi) { return open_backing(path, fi, false, 0); }
int fs_create(const char* path, mode_t mode, fuse_file_info* fi) {
  return open_backing(path, fi, true, mode);
}

int fs_read(const char*, char* buf, size_t size, off_t off, fuse_file_info* fi) {
  ssize_t n = ::pread(static_cast<int>(fi->fh), buf, size, off);
  return n < 0 ? -errno : static_cast<int>(n);
}

int fs_write(const char*, const char* buf, size_t size, off_t off, fuse_file_info* fi) {
  ssize_t n = ::pwrite(static_cast<int>(fi->fh), buf, size, off);
  if (n < 0) return -errno;
  if (n > 0) {
    std::lock_guard lock(g_mu);
    add_range(g_unsynced[inode_of(static_cast<int>(fi->fh))], static_cast<uint64_t>(off),
              static_cast<uint64_t>(off) + static_cast<uint64_t>(n));
  }
  return static_cast<int>(n);
}

int fs_fsync(const char*, int datasync, fuse_file_info* fi) {
  const int fd = static_cast<int>(fi->fh);
  if ((datasync ? ::fdatasync(fd) : ::fsync(fd)) != 0) return -errno;
  std::lock_guard lock(g_mu);
  g_unsynced.erase(inode_of(fd));
  return 0;
}

int fs_flush(const char*, fuse_file_info*) { return 0; }

int fs_release(const char*, fuse_file_info* fi) {
  if (g_release_delay_ms > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(g_release_delay_ms));
  ::close(static_cast<int>(fi->fh));
  return 0;
}

int fs_fsyncdir(const char*, int, fuse_file_info*) { return 0; }

int fs_fallocate(const char*, int mode, off_t off, off_t len, fuse_file_info* fi) {
  return neg_errno(::fallocate(static_cast<int>(fi->fh), mode, off, len));
}

int fs_statfs(const char*, struct statvfs* st) { return neg_errno(::statvfs(g_root.c_str(), st)); }

int fs_utimens(const char* path, const timespec tv[2], fuse_file_info*) {
  return neg_errno(::utimensat(AT_FDCWD, real(path).c_str(), tv, AT_SYMLINK_NOFOLLOW));
}

int fs_chmod(const char* path, mode_t mode, fuse_file_info*) {
  return neg_errno(::chmod(real(path).c_str(), mode));
}

int fs_getxattr(const char* path, const char* name, char* value, size_t size) {
  if (std::strcmp(name, "user.flushfs.unsynced") != 0) return -ENODATA;
  struct stat st {};
  if (::lstat(real(path).c_str(), &st) != 0) return -errno;
  std::string text;
  {
    std::lock_guard lock(g_mu);
    auto it = g_unsynced.find(st.st_ino);
    if (it != g_unsynced.end()) {
      for (auto [from, to] : it->second) {
        text += (text.empty() ? "" : " ") + std::to_string(from) + "-" + std::to_string(to);
      }
    }
  }
  if (size == 0) return static_cast<int>(text.size());
  if (size < text.size()) return -ERANGE;
  std::memcpy(value, text.data(), text.size());
  return static_cast<int>(text.size());
}

void* fs_init(fuse_conn_info*, fuse_config* cfg) {
  // No caching of names or attributes: the test reads the backing directory
  // and this file system's view must match it at once.
  cfg->entry_timeout = 0;
  cfg->attr_timeout = 0;
  cfg->negative_timeout = 0;
  // Release then runs without holding the file's path lock, as it would in a
  // daemon that handles requests out of order: an unlink can overtake it.
  cfg->nullpath_ok = 1;
  return nullptr;
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: flushfs <backing-dir> <mountpoint> [fuse options]\n");
    return 2;
  }
  char* root = ::realpath(argv[1], nullptr);
  if (root == nullptr) {
    std::perror(argv[1]);
    return 2;
  }
  g_root = root;
  std::free(root);
  g_release_delay_ms = env_int("FLUSHFS_RELEASE_DELAY_MS");
  g_fail_direct_open = env_int("FLUSHFS_FAIL_DIRECT_OPEN");

  fuse_operations ops{};
  ops.getattr = fs_getattr;
  ops.opendir = fs_opendir;
  ops.readdir = fs_readdir;
  ops.releasedir = fs_releasedir;
  ops.mkdir = fs_mkdir;
  ops.rmdir = fs_rmdir;
  ops.unlink = fs_unlink;
  ops.rename = fs_rename;
  ops.truncate = fs_truncate;
  ops.open = fs_open;
  ops.create = fs_create;
  ops.read = fs_read;
  ops.write = fs_write;
  ops.fsync = fs_fsync;
  ops.flush = fs_flush;
  ops.release = fs_release;
  ops.fsyncdir = fs_fsyncdir;
  ops.fallocate = fs_fallocate;
  ops.statfs = fs_statfs;
  ops.utimens = fs_utimens;
  ops.chmod = fs_chmod;
  ops.getxattr = fs_getxattr;
  ops.init = fs_init;

  // Foreground, so the test owns the process and sees it exit.
  std::vector<char*> args{argv[0], argv[2], const_cast<char*>("-f")};
  for (int i = 3; i < argc; ++i) args.push_back(argv[i]);
  return fuse_main(static_cast<int>(args.size()), args.data(), &ops, nullptr);
}
