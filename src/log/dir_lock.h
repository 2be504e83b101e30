// The LOCK file of a log directory: an flock held for the session, naming
// the holder's pid for whoever finds it taken. An open that created the
// file and then failed removes it again, so a refused directory is left as
// it was found; one that found it there leaves it empty.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "io/file.h"
#include "synclog/config.h"
#include "synclog/error.h"

namespace synclog {

class DirLock {
 public:
  DirLock() = default;
  DirLock(DirLock&& o) noexcept
      : file_(std::move(o.file_)),
        created_(std::exchange(o.created_, false)),
        held_(std::exchange(o.held_, false)) {}
  DirLock& operator=(DirLock&& o) noexcept;
  ~DirLock();

  [[nodiscard]] static Result<DirLock> acquire(const Config& config);
  // For readers that never open the log (synclog-dump): the holder's text
  // ("pid N", or empty if it recorded none) if a live process holds the lock
  // on `dir`, nullopt if nobody does or there is no LOCK file. Takes nothing
  // but an instant's shared lock (io::File::locked_elsewhere).
  [[nodiscard]] static Result<std::optional<std::string>> probe(const std::filesystem::path& dir);
  // Writes the pid into the file (after the direct I/O probe has used it);
  // on a full disk the file stays empty instead.
  [[nodiscard]] Result<void> record_holder() const;
  // The open succeeded: the file stays as it is when the lock is released.
  void keep() { created_ = held_ = false; }
  // Lets the lock go (close()).
  void release() { file_.close(); }
  const std::filesystem::path& path() const { return file_.path(); }

 private:
  // A failed open undoes what it did to the file: removes it if it made
  // it, else cuts what the direct I/O probe wrote into it.
  void undo();
  io::File file_;
  bool created_ = false;
  bool held_ = false;  // this process holds the lock and has not kept it
};

}  // namespace synclog
