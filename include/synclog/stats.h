// Log::stats(): a snapshot of counters and latency histograms, recorded per
// thread and merged when read, and two text formats for it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "synclog/export.h"

namespace synclog {

struct Latency {
  uint64_t count = 0;
  uint64_t mean_ns = 0;
  uint64_t p50_ns = 0;
  uint64_t p90_ns = 0;
  uint64_t p99_ns = 0;
  uint64_t p999_ns = 0;
  uint64_t max_ns = 0;
};

struct Stats {
  uint64_t appends = 0;
  uint64_t bytes = 0;  // payload bytes appended
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

  // append() call to return (includes the durability wait). Periodic mode
  // times one append in 128 per thread (two clock reads would double the
  // cost of an append that does not wait), so there append.count is the
  // samples taken; appends counts them all.
  Latency append;
  Latency durable_wait;     // batch/group: waiting for the sync after the record was written
  Latency sync;             // one backend persist
  Latency allocation_wait;  // waiting for a segment at a switch
};

// Prometheus text exposition format (counters, and summaries with quantiles).
SYNCLOG_API std::string to_prometheus(const Stats& stats, std::string_view prefix = "synclog");
// One JSON object.
SYNCLOG_API std::string to_json(const Stats& stats);

}  // namespace synclog
