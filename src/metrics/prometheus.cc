// to_prometheus(): the text exposition format, version 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>
#include <string>

#include "synclog/stats.h"

namespace synclog {
namespace {

bool is_name(std::string_view s, bool colons) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (!(alpha || (i > 0 && digit) || (colons && c == ':'))) return false;
  }
  return true;
}

// Well-formed UTF-8 (RFC 3629: no overlongs, surrogates or code points
// past U+10FFFF): the format is UTF-8 and a scraper rejects the rest.
bool is_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    for (int k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += static_cast<size_t>(n) + 1;
  }
  return true;
}

std::string escape_value(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// Enough digits to tell 1-2-5 bounds and nanoseconds apart.
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
std::string seconds(uint64_t ns) { return num(static_cast<double>(ns) / 1e9); }

Result<std::string> render_labels(const std::vector<MetricLabel>& labels) {
  std::string out;
  std::set<std::string_view> seen;
  for (const auto& [name, value] : labels) {
    if (!is_name(name, false)) {
      return make_error(Errc::invalid_argument,
                        "metric label name '" + name +
                            "' is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)");
    }
    if (name.starts_with("__")) {
      return make_error(Errc::invalid_argument, "metric label name '" + name +
                                                    "' starts with \"__\", which Prometheus "
                                                    "reserves for itself");
    }
    if (name == "le") {
      return make_error(Errc::invalid_argument,
                        "metric label name 'le' is the histogram buckets' own label");
    }
    if (!seen.insert(name).second) {
      return make_error(Errc::invalid_argument, "metric label '" + name + "' is given twice");
    }
    if (!is_utf8(value)) {
      return make_error(Errc::invalid_argument,
                        "value of metric label '" + name + "' is not valid UTF-8");
    }
    if (!out.empty()) out += ",";
    out += name + "=\"" + escape_value(value) + "\"";
  }
  return out;
}

// Each family once, with a sample per log: the format wants a family's
// samples together, under one # HELP and # TYPE.
class Exposition {
 public:
  Exposition(std::string_view prefix, const std::vector<const Stats*>& stats,
             std::vector<std::string> labels)
      : prefix_(std::string(prefix) + "_"), stats_(stats), labels_(std::move(labels)) {}

  // `get` gives a sample's value from a Stats: a member pointer or a callable.
  void counter(const char* name, auto get, const char* help) {
    family(name, "counter", help);
    for (size_t i = 0; i < stats_.size(); ++i) {
      sample(i, name, "", std::to_string(std::invoke(get, *stats_[i])));
    }
  }
  void gauge(const char* name, auto get, const char* help) {
    family(name, "gauge", help);
    for (size_t i = 0; i < stats_.size(); ++i) sample(i, name, "", std::invoke(get, *stats_[i]));
  }
  void histogram(const std::string& name, Latency Stats::*member, const char* help) {
    family(name, "histogram", help);
    for (size_t i = 0; i < stats_.size(); ++i) {
      const Latency& l = (*stats_[i]).*member;
      for (const auto& b : l.buckets) {
        sample(i, name + "_bucket", "le=\"" + seconds(b.le_ns) + "\"", std::to_string(b.count));
      }
      sample(i, name + "_bucket", "le=\"+Inf\"", std::to_string(l.count));
      sample(i, name + "_sum", "", seconds(l.sum_ns));
      sample(i, name + "_count", "", std::to_string(l.count));
    }
  }
  std::string take() { return std::move(out_); }

 private:
  void family(const std::string& name, const char* type, const char* help) {
    out_ +=
        "# HELP " + prefix_ + name + " " + help + "\n# TYPE " + prefix_ + name + " " + type + "\n";
  }
  // One sample of log i; `extra` is one more label (le="...") or empty.
  void sample(size_t i, const std::string& name, const std::string& extra,
              const std::string& value) {
    const std::string& labels = labels_[i];
    out_ += prefix_ + name;
    if (!labels.empty() || !extra.empty()) {
      out_ += "{" + labels + (!labels.empty() && !extra.empty() ? "," : "") + extra + "}";
    }
    out_ += " " + value + "\n";
  }

  std::string prefix_;
  const std::vector<const Stats*>& stats_;
  std::vector<std::string> labels_;
  std::string out_;
};

std::string seconds_of_us(uint64_t us) { return num(static_cast<double>(us) / 1e6); }

}  // namespace

Result<std::string> to_prometheus(const Stats& stats, std::string_view prefix,
                                  const std::vector<MetricLabel>& labels) {
  return to_prometheus(std::vector<LabeledStats>{{labels, stats}}, prefix);
}

Result<std::string> to_prometheus(const std::vector<LabeledStats>& logs, std::string_view prefix) {
  if (!is_name(prefix, true)) {
    return make_error(Errc::invalid_argument,
                      "metric prefix '" + std::string(prefix) +
                          "' is not a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)");
  }
  std::vector<std::string> labels;
  std::vector<const Stats*> stats;
  for (const auto& l : logs) {
    auto rendered = render_labels(l.labels);
    if (!rendered) return std::unexpected(rendered.error());
    if (std::find(labels.begin(), labels.end(), *rendered) != labels.end()) {
      return make_error(Errc::invalid_argument, "two logs have the same metric labels {" +
                                                    *rendered +
                                                    "}: their samples could not be told apart");
    }
    labels.push_back(std::move(*rendered));
    stats.push_back(&l.stats);
  }
  Exposition e(prefix, stats, std::move(labels));
  auto u = [](uint64_t Stats::*m) { return [m](const Stats& s) { return std::to_string(s.*m); }; };
  e.counter("appends_total", &Stats::appends, "Records appended.");
  e.counter("append_bytes_total", &Stats::bytes, "Payload bytes appended.");
  e.counter("append_stored_bytes_total", &Stats::stored_bytes,
            "Payload bytes appended as stored in segments (compressed and/or encrypted).");
  e.counter("syncs_total", &Stats::syncs, "Syncs completed.");
  e.gauge(
      "records_per_sync", [](const Stats& s) { return num(s.records_per_sync); },
      "Appends per completed sync.");
  e.counter("padding_bytes_total", &Stats::padding_bytes,
            "Bytes padded to end syncs on block boundaries.");
  e.counter("segments_created_total", &Stats::segments_created, "Segment files created.");
  e.counter("segments_recycled_total", &Stats::segments_recycled, "Released segment files reused.");
  e.counter("segments_released_total", &Stats::segments_released,
            "Segments let go by release_before.");
  e.counter("allocation_stalls_total", &Stats::allocation_stalls,
            "Times no spare segment was ready.");
  e.counter("lag_blocked_appends_total", &Stats::lag_blocked_appends,
            "Periodic mode: appends blocked by a lagging sync.");
  e.gauge(
      "max_sync_lag_seconds", [](const Stats& s) { return seconds_of_us(s.max_sync_lag_us); },
      "Periodic mode: largest sync lag seen by a blocked append.");
  e.counter("failures_total", &Stats::failures, "1 once the log failed stop after a sync error.");
  e.counter("segments_archived_total", &Stats::segments_archived,
            "Segments archived this session.");
  e.counter("archive_failures_total", &Stats::archive_failures,
            "Failed archive attempts this session (each is retried).");
  e.gauge("archive_pending_segments", u(&Stats::archive_pending),
          "Complete, durable segments waiting to be archived.");
  e.counter("cdc_segments_linked_total", &Stats::cdc_segments_linked,
            "Segments linked into cdc_dir this session.");
  e.gauge("cdc_bytes", u(&Stats::cdc_bytes),
          "Bytes of files in cdc_dir (counted against cdc_max_size).");
  e.counter("cdc_blocked_appends_total", &Stats::cdc_blocked_appends,
            "Segment switches that waited because cdc_dir was full (cdc_max_size).");
  e.counter("callback_exceptions_total", &Stats::callback_exceptions,
            "Completion callbacks that threw (caught; later callbacks still ran).");
  // A position is 64 bits, more than a float64 sample holds exactly: its
  // two halves are two gauges.
  e.gauge(
      "durable_segment", [](const Stats& s) { return std::to_string(s.durable.segment()); },
      "Segment id of the durable position: every record before it is durable.");
  e.gauge(
      "durable_offset_bytes", [](const Stats& s) { return std::to_string(s.durable.offset()); },
      "Offset of the durable position inside its segment.");
  e.gauge("disk_bytes", u(&Stats::disk_bytes),
          "Bytes of all segment files, spares and files waiting to be recycled included.");
  e.gauge("segment_files", u(&Stats::segment_files),
          "Segment files in the log (holding records or room for them).");
  e.gauge("spare_files", u(&Stats::spare_files),
          "Spare segment files ready ahead, and released files waiting to be recycled.");
  struct Lat {
    const char* name;
    Latency Stats::*member;
    const char* help;
  };
  const Lat lats[] = {
      {"append", &Stats::append, "append() call to return, durability wait included."},
      {"durable_wait", &Stats::durable_wait,
       "Batch and group mode: wait for the sync after the record was written."},
      {"sync", &Stats::sync, "One backend persist (msync, fdatasync, direct write)."},
      {"allocation_wait", &Stats::allocation_wait,
       "Wait for a spare segment at a segment switch."}};
  for (const auto& l : lats) e.histogram(std::string(l.name) + "_seconds", l.member, l.help);
  for (const auto& l : lats) {
    const std::string name = std::string(l.name) + "_max_seconds";
    e.gauge(
        name.c_str(), [&](const Stats& s) { return seconds((s.*l.member).max_ns); },
        "Largest sample of the histogram named without _max, since the log opened.");
  }
  return e.take();
}

}  // namespace synclog
