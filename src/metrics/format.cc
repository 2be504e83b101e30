#include <cstdio>
#include <string>

#include "synclog/stats.h"

namespace synclog {
namespace {

struct Named {
  const char* name;
  const Latency* latency;
};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

std::string to_prometheus(const Stats& s, std::string_view prefix) {
  const std::string p(prefix);
  std::string out;
  auto counter = [&](const char* name, uint64_t v, const char* help) {
    out += "# HELP " + p + "_" + name + " " + help + "\n# TYPE " + p + "_" + name + " counter\n" +
           p + "_" + name + " " + std::to_string(v) + "\n";
  };
  auto gauge = [&](const char* name, double v, const char* help) {
    out += "# HELP " + p + "_" + name + " " + help + "\n# TYPE " + p + "_" + name + " gauge\n" + p +
           "_" + name + " " + num(v) + "\n";
  };
  counter("appends_total", s.appends, "Records appended.");
  counter("append_bytes_total", s.bytes, "Payload bytes appended.");
  counter("syncs_total", s.syncs, "Syncs completed.");
  gauge("records_per_sync", s.records_per_sync, "Appends per completed sync.");
  counter("padding_bytes_total", s.padding_bytes, "Bytes padded to end syncs on block boundaries.");
  counter("segments_created_total", s.segments_created, "Segment files created.");
  counter("segments_recycled_total", s.segments_recycled, "Released segment files reused.");
  counter("segments_released_total", s.segments_released, "Segments let go by release_before.");
  counter("allocation_stalls_total", s.allocation_stalls, "Times no spare segment was ready.");
  counter("lag_blocked_appends_total", s.lag_blocked_appends,
          "Periodic mode: appends blocked by a lagging sync.");
  gauge("max_sync_lag_seconds", static_cast<double>(s.max_sync_lag_us) / 1e6,
        "Periodic mode: largest sync lag seen by a blocked append.");
  counter("failures_total", s.failures, "1 once the log failed stop after a sync error.");
  const Named lats[] = {{"append_seconds", &s.append},
                        {"durable_wait_seconds", &s.durable_wait},
                        {"sync_seconds", &s.sync},
                        {"allocation_wait_seconds", &s.allocation_wait}};
  for (const auto& [name, l] : lats) {
    const std::string m = p + "_" + name;
    out += "# TYPE " + m + " summary\n";
    const std::pair<const char*, uint64_t> qs[] = {{"0.5", l->p50_ns},
                                                   {"0.9", l->p90_ns},
                                                   {"0.99", l->p99_ns},
                                                   {"0.999", l->p999_ns},
                                                   {"1", l->max_ns}};
    for (auto [q, v] : qs) {
      out += m + "{quantile=\"" + q + "\"} " + num(static_cast<double>(v) / 1e9) + "\n";
    }
    out += m + "_sum " +
           num(static_cast<double>(l->mean_ns) * static_cast<double>(l->count) / 1e9) + "\n" + m +
           "_count " + std::to_string(l->count) + "\n";
  }
  return out;
}

std::string to_json(const Stats& s) {
  std::string out = "{";
  auto field = [&](const char* name, const std::string& v) {
    if (out.size() > 1) out += ",";
    out += "\"" + std::string(name) + "\":" + v;
  };
  auto u = [](uint64_t v) { return std::to_string(v); };
  auto lat = [&](const Latency& l) {
    return "{\"count\":" + u(l.count) + ",\"mean_ns\":" + u(l.mean_ns) +
           ",\"p50_ns\":" + u(l.p50_ns) + ",\"p90_ns\":" + u(l.p90_ns) +
           ",\"p99_ns\":" + u(l.p99_ns) + ",\"p999_ns\":" + u(l.p999_ns) +
           ",\"max_ns\":" + u(l.max_ns) + "}";
  };
  field("appends", u(s.appends));
  field("bytes", u(s.bytes));
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
  field("append", lat(s.append));
  field("durable_wait", lat(s.durable_wait));
  field("sync", lat(s.sync));
  field("allocation_wait", lat(s.allocation_wait));
  return out + "}";
}

}  // namespace synclog
