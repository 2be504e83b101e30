// A RocksDB baseline for batch points: how fast RocksDB itself makes writes
// durable (one WAL fsync per write group) at the same thread count and
// record size, on the same media fio runs on (wants_medium, fio.h). Uses
// Debian's db_bench (package rocksdb-tools), run as
//
//   db_bench --benchmarks=fillrandom --sync=true --threads=T --key_size=16
//     --value_size=<record - 16, at least 1> --compression_type=none
//     --disable_auto_compactions=true --db=<medium dir>/<work>/rocksdb-T
//     --num=1000000 --duration=<runtime, whole seconds, at least 1>
//     --ops_between_duration_checks=10 --histogram=false --statistics=false
//
// once per (medium, threads, record size); the database is removed after
// each run. With --threads, fillrandom's summary line gives the aggregate
// rate: "fillrandom   :  345.114 micros/op 11575 ops/sec 1.036 seconds ...".
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "options.h"
#include "report.h"

namespace bench {

struct RocksRun {
  std::string medium;
  uint32_t threads = 0;
  uint64_t record = 0;      // bytes per write: key 16 + value
  uint64_t value_size = 0;  // --value_size
  std::string command;
  std::filesystem::path raw;  // db_bench's stdout, saved under --out; empty: not saved
  bool ok = false;
  std::string error;
  double ops_per_s = 0;  // all threads together
  double micros_per_op = 0;
};

bool db_bench_installed();

// Reads the summary line of `benchmark` ("fillrandom") from db_bench's
// stdout. Returns an error, or "" on success.
std::string parse_db_bench(const std::string& out, const std::string& benchmark, double* ops_per_s,
                           double* micros_per_op);

// Runs db_bench once per (medium, threads, record size) and relates each
// verified batch point to it. Removes its databases when destroyed.
class RocksBaseline {
 public:
  RocksBaseline(const RunOptions& run, std::string work_name);
  ~RocksBaseline();
  RocksBaseline(const RocksBaseline&) = delete;
  RocksBaseline& operator=(const RocksBaseline&) = delete;

  // Whether a point would get a baseline (batch mode on a chosen medium).
  bool wants(const std::string& mode, const MediumInfo& m) const;
  // Sets row->rocksdb_ops and row->rocksdb_ratio for a verified batch row,
  // running db_bench if no cached run fits. Returns the run used, or nullptr
  // if the row does not qualify; a failed run is returned with ok false.
  const RocksRun* measure(Row* row, const MediumInfo& medium,
                          const std::function<void(const std::string&)>& progress);

  const std::vector<RocksRun>& runs() const { return runs_; }

 private:
  const RunOptions& run_;
  std::string work_;
  std::vector<RocksRun> runs_;
  std::map<std::tuple<std::string, uint32_t, uint64_t>, size_t> cache_;  // -> index in runs_
  std::set<std::filesystem::path> dirs_;  // databases, removed after each run and at the end
};

// The table section: engine op/s against RocksDB's for every row with a
// baseline, and the failed runs.
std::string format_rocksdb(const std::vector<Row>& rows, const std::vector<RocksRun>& runs);

}  // namespace bench
