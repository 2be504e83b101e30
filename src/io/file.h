// Thin wrappers over the file syscalls. Every failure comes back as an Error
// that names the operation and the path, with errno kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "synclog/error.h"

namespace synclog::io {

class File {
 public:
  // Every mode but read_following_links refuses a symbolic link as the last
  // path component (O_NOFOLLOW): a log file swapped for a link could make
  // the log read or write some other file with the engine's privileges.
  enum class Mode { read, read_write, create_new, create_or_open, direct, read_following_links };

  File() = default;
  File(File&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  File& operator=(File&& o) noexcept;
  ~File();

  // create_new fails if the file exists; direct adds O_DIRECT to read_write.
  // A file created here gets `perms` (before the umask): owner-only by
  // default, since a log holds the engine's data.
  [[nodiscard]] static Result<File> open(const std::filesystem::path& path, Mode mode,
                                         uint32_t perms = 0600);

  int fd() const { return fd_; }
  const std::filesystem::path& path() const { return path_; }
  bool is_open() const { return fd_ >= 0; }

  // Reads up to buf.size() bytes; returns how many were read (short at EOF).
  [[nodiscard]] Result<size_t> read_at(uint64_t offset, std::span<std::byte> buf) const;
  // Writes all of buf, retrying short writes.
  [[nodiscard]] Result<void> write_at(uint64_t offset, std::span<const std::byte> buf) const;
  // Reserves real blocks so later writes (and mmap stores) cannot hit ENOSPC.
  [[nodiscard]] Result<void> allocate(uint64_t size) const;
  [[nodiscard]] Result<void> datasync() const;
  [[nodiscard]] Result<void> sync() const;
  [[nodiscard]] Result<uint64_t> size() const;
  [[nodiscard]] Result<void> truncate(uint64_t size) const;
  // Clears the permission bits outside `perms` (never sets one): for a file
  // made before, under other settings, that is taken into use again.
  [[nodiscard]] Result<void> restrict_perms(uint32_t perms) const;
  // Advisory exclusive lock held until the file is closed.
  [[nodiscard]] Result<void> lock_exclusive() const;
  // True if another open of the file holds a lock on it. To ask, it takes a
  // shared lock and drops it at once, so a lock_exclusive() racing with the
  // call may fail for that instant.
  [[nodiscard]] Result<bool> locked_elsewhere() const;
  void close();

 private:
  int fd_ = -1;
  std::filesystem::path path_;
};

// Directory operations.
[[nodiscard]] Result<std::vector<std::string>> list_dir(const std::filesystem::path& dir);
[[nodiscard]] Result<void> sync_dir(const std::filesystem::path& dir);
[[nodiscard]] Result<void> rename_file(const std::filesystem::path& from,
                                       const std::filesystem::path& to);
[[nodiscard]] Result<void> remove_file(const std::filesystem::path& path);
// Replaces `path` with `bytes` through `tmp`: written, cut to size (a longer
// file a crash left keeps no stale tail), fdatasynced, then renamed over
// `path`, so a crash leaves the old contents or the new ones, never a torn
// file. The directory is not synced: callers that need the rename durable
// sync it.
[[nodiscard]] Result<void> replace_file(const std::filesystem::path& path,
                                        const std::filesystem::path& tmp,
                                        std::span<const std::byte> bytes, uint32_t perms);
// Fails unless `dir` is an existing directory this process can write into.
[[nodiscard]] Result<void> check_writable_dir(const std::filesystem::path& dir);
// Creates `dir` (its parent must exist) with `perms`, and makes its entry
// durable by syncing the parent (also when it existed). False if it existed
// already.
[[nodiscard]] Result<bool> create_dir(const std::filesystem::path& dir, uint32_t perms);
// True if `path` is a directory itself (a symbolic link to one is not).
[[nodiscard]] Result<bool> is_real_dir(const std::filesystem::path& path);
// Whether anything (a symbolic link too) has this name; an error only if
// that cannot be told (EACCES...).
[[nodiscard]] Result<bool> exists(const std::filesystem::path& path);
// Removes an empty directory.
[[nodiscard]] Result<void> remove_dir(const std::filesystem::path& dir);

// This process's id (for the LOCK file).
int process_id();

// Builds the Error for a failed syscall: "<what> <path>: <strerror>".
std::unexpected<Error> sys_error(const std::string& what, const std::filesystem::path& path,
                                 int err);

}  // namespace synclog::io
