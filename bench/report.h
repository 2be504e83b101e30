// The results of a sweep in three shapes: a human table (one line per point,
// like cassandra-stress's summary), JSON lines and CSV. A row carries numbers
// only when its point was verified; a skipped or failed point is a status and
// a message.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "point.h"
#include "runner.h"
#include "sweep.h"
#include "verify.h"

namespace bench {

struct Row {
  size_t index = 0;  // the point's index; 0 for a skip row
  std::string job, medium, medium_desc, fs, device;
  std::string backend, segment_kind, mode, size;
  uint64_t size_min = 0, size_max = 0;
  uint32_t threads = 0;            // 0 for a skip row (every thread count)
  uint32_t inflight = 0;           // append_async calls per writer; 0: blocking
  uint32_t batch = 1;              // records per write batch
  std::string config;              // the point's Config, "key=value,..."
  std::string payload = "random";  // record contents (record.h)
  std::string compression = "none", encryption = "none";
  std::string status;   // "verified" | "skipped" | "failed"
  std::string message;  // why skipped or failed; notes ("capped at 1GiB")

  // Valid when status == "verified".
  double elapsed_s = 0;
  uint64_t ops = 0;
  double ops_per_s = 0;
  double mb_per_s = 0;  // payload bytes, 10^6 per MB
  // Segment space per appended record, framing and sync markers included
  // (Measurement::stored_per_record); 0: fewer than two records.
  double stored_per_record = 0;
  uint64_t stored_bytes = 0, stored_records = 0;
  double engine_stored_per_record = -1;  // Stats' own count over the window; < 0: none
  double mean_us = 0, p50_us = 0, p95_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
  bool metrics = true;      // the point's Config metrics
  bool syncs_known = true;  // false: metrics off and the log counted no syncs
  uint64_t syncs = 0;
  double syncs_per_s = 0;
  double records_per_sync = 0;
  double cpu_user_pct = 0, cpu_sys_pct = 0;
  uint64_t errors = 0;
  uint64_t lag_blocked = 0, allocation_stalls = 0, segments_created = 0;
  bool capped = false;
  uint64_t segments_released = 0;
  uint64_t padding_bytes = 0;
  // Stored payload bytes per appended payload byte (compression=...,
  // encryption=...); 0 when the log counted nothing (metrics off).
  double stored_ratio = 0;
  std::string backend_in_use;
  uint32_t block_size = 0;
  double sync_mean_us = 0, sync_p50_us = 0, sync_p99_us = 0;  // whole run, the log's own
  uint64_t verified_records = 0;
  double verify_s = 0;

  // fio ceiling (fio.h), when it ran for this point.
  std::string fio_unit;  // "op/s" or "MB/s"; empty: none
  double fio_ceiling = 0;
  double fio_ratio = 0;
  std::string fio_basis;
  double fio_round_p99_us = 0;  // sync-write ceilings: fio write p99 + fdatasync p99; 0: none
  double fio_p99_ratio = 0;     // p99_us / fio_round_p99_us

  // RocksDB baseline (rocksdb.h), batch points: db_bench's durable op/s.
  double rocksdb_ops = 0;  // 0: none
  double rocksdb_ratio = 0;
};

// Two verified rows that differ only in Config metrics (--metrics on,off).
struct MetricsPair {
  size_t on = 0, off = 0;  // row indexes
  std::string label;
  double on_ops = 0, off_ops = 0;
  double ratio = 0;         // on_ops / off_ops
  double overhead_pct = 0;  // (1 - ratio) x 100: throughput lost to metrics
};

Row make_row(const Point& p, const Measurement& m, const Verification& v);
Row make_failed_row(const Point& p, const std::string& message);
Row make_skip_row(const Skip& s);

// The payload and, when set, compression and encryption: "text+lz4+aes".
std::string data_label(const Row& r);
std::string table_header();
std::string table_row(const Row& r);
nlohmann::json to_json(const Row& r);
std::vector<MetricsPair> metrics_pairs(const std::vector<Row>& rows);
std::string format_metrics_overhead(const std::vector<MetricsPair>& pairs);
std::string csv_header();
std::string csv_row(const Row& r);

}  // namespace bench
