// Log::stats(): a snapshot of counters, gauges and latency histograms
// (recorded per thread and merged when read), and two text formats for it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "synclog/error.h"
#include "synclog/export.h"
#include "synclog/position.h"

namespace synclog {

// The upper bounds of Latency::buckets, in nanoseconds: 1-2-5 steps from
// 100 ns to 10 s. Fixed, so histograms of any two logs (or processes) add up.
inline constexpr std::array<uint64_t, 24> kLatencyBucketBoundsNs = {
    100,         200,         500,         1'000,         2'000,         5'000,
    10'000,      20'000,      50'000,      100'000,       200'000,       500'000,
    1'000'000,   2'000'000,   5'000'000,   10'000'000,    20'000'000,    50'000'000,
    100'000'000, 200'000'000, 500'000'000, 1'000'000'000, 2'000'000'000, 10'000'000'000};

struct LatencyBucket {
  uint64_t le_ns = 0;  // upper bound (one of kLatencyBucketBoundsNs)
  uint64_t count = 0;  // cumulative: samples at or below le_ns
};

struct Latency {
  uint64_t count = 0;
  uint64_t sum_ns = 0;
  uint64_t mean_ns = 0;
  uint64_t p50_ns = 0;
  uint64_t p90_ns = 0;
  uint64_t p99_ns = 0;
  uint64_t p999_ns = 0;
  uint64_t max_ns = 0;
  // One per kLatencyBucketBoundsNs, cumulative, never above `count` (the
  // implicit +Inf bucket). The recorder keeps 8 sub-buckets per power of
  // two; a sample counts under the first bound at or above the top of its
  // sub-bucket, so it may show up to 12.5% later than its value, never
  // earlier.
  std::vector<LatencyBucket> buckets;
};

struct Stats {
  uint64_t appends = 0;
  uint64_t bytes = 0;  // payload bytes appended
  // What those payloads took in the segments as stored (compressed and/or
  // encrypted; equal to bytes without transforms), frame headers and
  // padding not counted.
  uint64_t stored_bytes = 0;
  uint64_t syncs = 0;
  double records_per_sync = 0;
  uint64_t padding_bytes = 0;  // direct I/O, tail=pad: bytes spent ending syncs on block boundaries
  uint64_t segments_created = 0;
  uint64_t segments_recycled = 0;
  uint64_t segments_released = 0;
  uint64_t allocation_stalls = 0;    // times a segment was needed and none was ready
  uint64_t lag_blocked_appends = 0;  // periodic mode: appends that waited for a lagging sync
  uint64_t max_sync_lag_us = 0;  // periodic mode: largest completed-sync age a blocked append saw
  uint64_t failures = 0;         // 1 once the log failed stop

  // Archiving (0 and empty without it): segments archived this session,
  // failed attempts this session (each is retried), complete and durable
  // segments waiting to be archived, and the last attempt's error (empty
  // once an attempt succeeds).
  uint64_t segments_archived = 0;
  uint64_t archive_failures = 0;
  uint64_t archive_pending = 0;
  std::string archive_error;

  // Change data capture (0 and empty without cdc_dir): segments linked into
  // cdc_dir this session, bytes of files in cdc_dir now (what counts against
  // cdc_max_size), segment switches that found no spare because cdc_dir was
  // full (each then waited, up to allocation_timeout), and the last error
  // writing an index file (empty once a write succeeds).
  uint64_t cdc_segments_linked = 0;
  uint64_t cdc_bytes = 0;
  uint64_t cdc_blocked_appends = 0;
  std::string cdc_error;

  // Completion callbacks (append_async) that threw: the exception was
  // caught on the log's callback thread and the later callbacks still ran.
  // The count this session, and the first one's what().
  uint64_t callback_exceptions = 0;
  std::string callback_error;

  // Space, as Log::segments() lists it: at the moment of the call.
  Position durable;            // Log::durable()
  uint64_t disk_bytes = 0;     // Log::disk_bytes(): every segment file, spares included
  uint64_t segment_files = 0;  // segment files in the log (records or room for them)
  uint64_t spare_files = 0;    // spares ready ahead, and released files waiting to be recycled

  // append() call to return (includes the durability wait). Periodic mode
  // times one append in 128 per thread (two clock reads would double the
  // cost of an append that does not wait), so there append.count is the
  // samples taken; appends counts them all.
  Latency append;
  Latency durable_wait;     // batch/group: waiting for the sync after the record was written
  Latency sync;             // one backend persist
  Latency allocation_wait;  // waiting for a segment at a switch
};

// One label added to every sample of an exposition, e.g. {"log", "orders"}
// so that two logs of one process can be told apart.
struct MetricLabel {
  std::string name;
  std::string value;
};

// Prometheus text exposition format 0.0.4: # HELP and # TYPE for every
// family; counters, gauges and histograms (cumulative _bucket{le=...},
// _sum, _count; latencies in seconds) and a _max_seconds gauge per latency.
// Every metric name starts with `prefix` + "_". Errc::invalid_argument if
// the prefix is not a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), a label name
// is not one ([a-zA-Z_][a-zA-Z0-9_]*), starts with "__", is "le" (the
// histograms' own label) or repeats, or a value is not UTF-8. Values are
// escaped as the format says: \\, \" and \n.
[[nodiscard]] SYNCLOG_API Result<std::string> to_prometheus(
    const Stats& stats, std::string_view prefix = "synclog",
    const std::vector<MetricLabel>& labels = {});
// Several logs of one process in one exposition: each family once, with a
// sample per log told apart by its labels (which must differ between logs).
struct LabeledStats {
  std::vector<MetricLabel> labels;
  Stats stats;
};
[[nodiscard]] SYNCLOG_API Result<std::string> to_prometheus(const std::vector<LabeledStats>& logs,
                                                            std::string_view prefix = "synclog");
// One JSON object with the same figures (latencies in ns, buckets as
// [{"le_ns":..,"count":..}], durable as {"segment":..,"offset":..}).
SYNCLOG_API std::string to_json(const Stats& stats);

}  // namespace synclog
