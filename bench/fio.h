// Runs fio's raw I/O patterns (fio-profiles/*.fio) on the bench media and
// relates each verified point to its ceiling:
//
// - batch and group: T writers that each wait for one record can at best
//   commit T records per write+fdatasync round, and a round writes T x the
//   record size. So ceiling op/s = T x (rounds/s of fio's sync-write profile
//   at bs = T x record bytes, on already-written blocks: overwrite=1).
//   Their append p99 is set against one round's p99, estimated from above
//   as fio's write completion p99 + fdatasync p99.
// - periodic: appends do not wait, so the ceiling is sequential bandwidth
//   (the large-block profile); the ratio is engine MB/s / fio MB/s.
//
// Profiles read FIO_DIR, FIO_BS, FIO_SIZE and FIO_RUNTIME from the
// environment (fio expands ${VAR} in job files); each first writes and
// fsyncs its 16 MiB file ([layout]), then runs the timed job on it.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "options.h"
#include "report.h"
#include "sweep.h"

namespace bench {

struct FioRun {
  std::string medium;
  std::string profile;  // file name
  uint64_t bs = 0;
  bool ok = false;
  std::string error;
  double iops = 0;
  double bw_bytes = 0;      // bytes/s
  double write_lat_us = 0;  // mean completion latency of a write
  double sync_lat_us = 0;   // mean fdatasync/msync latency (0 when none)
  double write_p99_us = 0;  // p99 of write completion latency (clat_ns)
  double sync_p99_us = 0;   // p99 of fdatasync latency (sync.lat_ns; 0 when none)
};

struct FioRatio {
  size_t point = 0;
  std::string label;  // the point's
  std::string medium;
  std::string unit;  // "op/s" or "MB/s"
  double engine = 0;
  double ceiling = 0;
  double ratio = 0;
  std::string basis;  // how the ceiling was derived
  // Sync-write ceilings only (unit op/s): the point's append p99 against one
  // write+fdatasync round's p99, estimated from above as fio's write p99 +
  // fdatasync p99 (the two tails need not fall in the same round).
  double engine_p99_us = 0;
  double round_p99_us = 0;  // 0: none
  double p99_ratio = 0;     // engine / round
};

bool fio_installed();

// Whether fio (and db_bench, rocksdb.h) run on a medium: the names in
// --fio-media, or when that is empty every medium that is not memory.
bool wants_medium(const RunOptions& run, const MediumInfo& m);

// Running external tools: a word quoted for /bin/sh, and a command's stdout
// (*status: pclose's; -1 if it could not start).
std::string shell_quote(const std::string& s);
std::string run_capture(const std::string& command, int* status);

// Reads fio's --output-format=json document (notes before the '{' are
// skipped) into *r: the last job's write IOPS, bandwidth, mean and p99
// latencies. Returns an error, or "" on success.
std::string parse_fio_json(std::string json, FioRun* r);

FioRun run_fio(const std::filesystem::path& profile, const std::filesystem::path& dir, uint64_t bs,
               double runtime_s, const std::filesystem::path& raw_json);

// Measures ceilings as the sweep goes: right after each verified batch or
// group point on a chosen medium, one sync-write run at that point's round
// size; for periodic points one bandwidth run per medium. Removes its fio
// files when destroyed.
class FioCeilings {
 public:
  FioCeilings(const RunOptions& run, std::string work_name);
  ~FioCeilings();
  FioCeilings(const FioCeilings&) = delete;
  FioCeilings& operator=(const FioCeilings&) = delete;

  // Whether fio runs on this medium (--fio-media; default: not memory).
  bool wants(const MediumInfo& m) const;
  // The ratio for a verified row, running fio if needed; nullopt if the
  // row does not qualify or fio failed (see runs()).
  std::optional<FioRatio> measure(const Row& row, const MediumInfo& medium,
                                  const std::function<void(const std::string&)>& progress);

  const std::vector<FioRun>& runs() const { return runs_; }
  const std::vector<FioRatio>& ratios() const { return ratios_; }

 private:
  const RunOptions& run_;
  std::string work_;
  std::vector<FioRun> runs_;
  std::vector<FioRatio> ratios_;
  std::map<std::string, size_t> bandwidth_;  // medium -> index in runs_
  std::set<std::filesystem::path> dirs_;
};

std::string format_ratios(const std::vector<FioRatio>& ratios, const std::vector<FioRun>& runs);

}  // namespace bench
