// KvStore: a key-value store that keeps its data in an in-memory map and makes
// every change durable in a synclog log before it returns. It is an example
// of embedding synclog, kept short enough to read in one sitting.
//
// On disk, under `dir`:
//   log/       the synclog log: one record per put or del, appended in batch
//              mode, so put() returns only once its record is durable (G1);
//              put_many() appends its records as one write batch
//   snapshot   the whole map as of a log position, written by checkpoint()
//
// Startup loads the snapshot (if any) and replays the log from the position
// the snapshot names. checkpoint() writes a new snapshot (temp file, fsync,
// rename, fsync the directory) and then releases the log segments it covers.
//
// Not thread-safe: one caller at a time (main.cc reads commands from stdin).
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "synclog/log.h"

namespace kv {

class KvStore {
 public:
  // Opens or creates the store in `dir`. `config` supplies the log settings
  // (backend, segment size...); its dir is set to dir/log and its mode to batch.
  [[nodiscard]] static synclog::Result<std::unique_ptr<KvStore>> open(
      const std::filesystem::path& dir, synclog::Config config = {});

  // Both return once the change is durable; on error the map is unchanged.
  [[nodiscard]] synclog::Result<void> put(std::string_view key, std::string_view value);
  [[nodiscard]] synclog::Result<void> del(std::string_view key);
  // Sets every pair as one log write batch: after a crash either all of
  // them are recovered or none (a later pair wins over an earlier one with
  // the same key). Returns once durable; on error the map is unchanged.
  struct KeyValue {
    std::string_view key, value;
  };
  [[nodiscard]] synclog::Result<void> put_many(std::span<const KeyValue> pairs);
  std::optional<std::string> get(std::string_view key) const;
  size_t size() const { return map_.size(); }

  // Writes the map to `snapshot` and releases the log before it.
  [[nodiscard]] synclog::Result<void> checkpoint();
  [[nodiscard]] synclog::Result<void> close() { return log_->close(); }

 private:
  KvStore(std::filesystem::path dir, std::unique_ptr<synclog::Log> log)
      : dir_(std::move(dir)), log_(std::move(log)) {}
  synclog::Result<void> load_snapshot();
  synclog::Result<void> replay();
  synclog::Result<void> append(char op, std::string_view key, std::string_view value);
  // Applies one log record to the map; false if it does not decode.
  bool apply(std::string_view record);

  std::filesystem::path dir_;
  std::unique_ptr<synclog::Log> log_;
  std::map<std::string, std::string, std::less<>> map_;
  // Replay starts here: just past the last record the map reflects.
  synclog::Position next_;
};

}  // namespace kv
