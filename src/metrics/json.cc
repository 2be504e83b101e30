// to_json(): the figures of to_prometheus() as one JSON object, in the
// units of Stats (nanoseconds, bytes).
#include <cstdio>
#include <string>

#include "synclog/stats.h"

namespace synclog {
namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// A JSON string: quotes, backslashes and control characters escaped.
std::string quoted(const std::string& v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

std::string to_json(const Stats& s) {
  std::string out = "{";
  auto field = [&](const char* name, const std::string& v) {
    if (out.size() > 1) out += ",";
    out += "\"" + std::string(name) + "\":" + v;
  };
  auto u = [](uint64_t v) { return std::to_string(v); };
  auto lat = [&](const Latency& l) {
    std::string buckets;
    for (const auto& b : l.buckets) {
      buckets += std::string(buckets.empty() ? "" : ",") + "{\"le_ns\":" + u(b.le_ns) +
                 ",\"count\":" + u(b.count) + "}";
    }
    return "{\"count\":" + u(l.count) + ",\"sum_ns\":" + u(l.sum_ns) +
           ",\"mean_ns\":" + u(l.mean_ns) + ",\"p50_ns\":" + u(l.p50_ns) +
           ",\"p90_ns\":" + u(l.p90_ns) + ",\"p99_ns\":" + u(l.p99_ns) +
           ",\"p999_ns\":" + u(l.p999_ns) + ",\"max_ns\":" + u(l.max_ns) + ",\"buckets\":[" +
           buckets + "]}";
  };
  field("appends", u(s.appends));
  field("bytes", u(s.bytes));
  field("stored_bytes", u(s.stored_bytes));
  field("syncs", u(s.syncs));
  field("records_per_sync", num(s.records_per_sync));
  field("padding_bytes", u(s.padding_bytes));
  field("segments_created", u(s.segments_created));
  field("segments_recycled", u(s.segments_recycled));
  field("segments_released", u(s.segments_released));
  field("allocation_stalls", u(s.allocation_stalls));
  field("lag_blocked_appends", u(s.lag_blocked_appends));
  field("max_sync_lag_us", u(s.max_sync_lag_us));
  field("failures", u(s.failures));
  field("segments_archived", u(s.segments_archived));
  field("archive_failures", u(s.archive_failures));
  field("archive_pending", u(s.archive_pending));
  field("archive_error", quoted(s.archive_error));
  field("cdc_segments_linked", u(s.cdc_segments_linked));
  field("cdc_bytes", u(s.cdc_bytes));
  field("cdc_blocked_appends", u(s.cdc_blocked_appends));
  field("cdc_error", quoted(s.cdc_error));
  field("callback_exceptions", u(s.callback_exceptions));
  field("callback_error", quoted(s.callback_error));
  field("durable",
        "{\"segment\":" + u(s.durable.segment()) + ",\"offset\":" + u(s.durable.offset()) + "}");
  field("disk_bytes", u(s.disk_bytes));
  field("segment_files", u(s.segment_files));
  field("spare_files", u(s.spare_files));
  field("append", lat(s.append));
  field("durable_wait", lat(s.durable_wait));
  field("sync", lat(s.sync));
  field("allocation_wait", lat(s.allocation_wait));
  return out + "}";
}

}  // namespace synclog
