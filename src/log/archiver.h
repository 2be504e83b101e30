// Archiver: a thread of the log that hands each complete, durable segment
// to the archive_command or the archive hook, in id order, retrying a
// failure with exponential backoff, and records its progress in the
// archive state file. Release waits for it (archived_through()); it never
// touches the append path and takes no lock that appenders take.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "segments/manager.h"
#include "sync/driver.h"
#include "synclog/error.h"

namespace synclog {

struct ArchiverOptions {
  std::filesystem::path dir;
  std::string command;  // archive_command; empty if `hook` is used
  std::function<Result<void>(const std::filesystem::path&, uint64_t)> hook;
  std::filesystem::path copy_dir;  // archive_dir: the built-in durable copy
  uint64_t log_id = 0;
  // Segments below this id are earlier sessions': complete and made
  // durable by open. This session's are complete once a later one holds
  // the durable position.
  uint64_t first_new_id = 0;
  uint64_t through = 0;  // already archived up to this id (the state file)
  uint32_t file_perms = 0600;
};

struct ArchiverStats {
  uint64_t archived = 0;   // this session
  uint64_t failures = 0;   // failed attempts this session
  uint64_t pending = 0;    // complete, durable segments not archived yet
  std::string last_error;  // of the last failed attempt; empty after a success
};

// %p -> `path`, %f -> its file name, %% -> % (Config::validate() allows
// no other % sequence).
std::string expand_archive_command(const std::string& command, const std::filesystem::path& path);

class Archiver {
 public:
  Archiver(ArchiverOptions options, const seg::SegmentManager& manager, const sync::Driver& driver);
  ~Archiver();

  void start();
  // Returns once the thread has stopped; waits for a command or hook call
  // in flight, starts no other.
  void stop();

  // Every segment of the log up to this id has been archived.
  uint64_t archived_through() const { return through_.load(std::memory_order_acquire); }
  ArchiverStats stats() const;

 private:
  void run();
  bool archivable(uint64_t id) const;
  // The next segment to archive, or 0 if none is complete and durable.
  uint64_t next_candidate() const;
  Result<void> archive(uint64_t id);

  const ArchiverOptions opt_;
  const seg::SegmentManager& manager_;
  const sync::Driver& driver_;
  std::atomic<uint64_t> through_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  uint64_t archived_ = 0;
  uint64_t failures_ = 0;
  std::string last_error_;
  std::thread thread_;
};

}  // namespace synclog
