#include "report.h"

#include <cstdio>

namespace bench {
namespace {

void set_medium(Row& r, const MediumInfo& m) {
  r.medium = m.name;
  r.medium_desc = m.describe();
  r.fs = m.fs_type;
  r.device = m.device;
}

Row base_row(const Point& p) {
  Row r;
  r.index = p.index;
  r.job = p.job;
  set_medium(r, *p.medium);
  r.backend = p.backend;
  r.segment_kind = p.segment_kind;
  r.mode = p.mode;
  r.size = p.size.label();
  r.size_min = p.size.min;
  r.size_max = p.size.max;
  r.threads = p.threads;
  r.inflight = p.inflight;
  r.batch = p.batch;
  r.config = p.config_text.empty() ? p.config.to_string() : p.config_text;
  r.metrics = p.config.metrics;
  r.payload = to_string(p.payload);
  r.compression = p.compression;
  r.encryption = p.encryption;
  return r;
}

std::string label_of(const Row& r) {
  std::string s = r.medium + " " + r.backend + "/" + r.segment_kind + " " + r.mode + " " + r.size +
                  " x" + std::to_string(r.threads);
  if (r.inflight > 0) s += " qd" + std::to_string(r.inflight);
  if (r.batch > 1) s += " b" + std::to_string(r.batch);
  if (r.payload != "random" || r.compression != "none" || r.encryption != "none") {
    s += " " + data_label(r);
  }
  return s;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// 3 significant digits, at most 9 wide: 0.734, 12.3, 1234, 123456.
std::string num(double v) {
  if (v < 10) return fmt("%.2f", v);
  if (v < 100) return fmt("%.1f", v);
  return fmt("%.0f", v);
}

std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

Row make_row(const Point& p, const Measurement& m, const Verification& v) {
  Row r = base_row(p);
  if (!v.ok || m.errors > 0) {
    r.status = "failed";
    r.message = !m.error.empty() ? m.error : v.message;
    if (!m.error.empty() && !v.ok) r.message += "; verification: " + v.message;
    r.errors = m.errors;
    return r;
  }
  r.status = "verified";
  r.elapsed_s = m.elapsed_s;
  r.ops = m.ops;
  r.ops_per_s = m.elapsed_s > 0 ? m.ops / m.elapsed_s : 0;
  r.mb_per_s = m.elapsed_s > 0 ? m.bytes / m.elapsed_s / 1e6 : 0;
  r.stored_per_record = m.stored_per_record;
  r.stored_bytes = m.stored_bytes;
  r.stored_records = m.stored_records;
  if (m.engine_stored_bytes && m.engine_appends > 0) {
    r.engine_stored_per_record =
        static_cast<double>(*m.engine_stored_bytes) / static_cast<double>(m.engine_appends);
  }
  const Histogram& h = m.latency;
  r.mean_us = h.mean() / 1e3;
  r.p50_us = h.percentile(0.50) / 1e3;
  r.p95_us = h.percentile(0.95) / 1e3;
  r.p99_us = h.percentile(0.99) / 1e3;
  r.p999_us = h.percentile(0.999) / 1e3;
  r.max_us = h.max() / 1e3;
  // Config metrics=false leaves the append counters and histograms at 0;
  // syncs are counted regardless (docs/config.md), but should a build stop
  // counting them too, show "-" rather than a misleading 0.
  r.syncs_known = p.config.metrics || m.sync.count > 0;
  if (r.syncs_known) {
    r.syncs = m.syncs;
    r.syncs_per_s = m.elapsed_s > 0 ? m.syncs / m.elapsed_s : 0;
    r.records_per_sync = m.syncs > 0 ? static_cast<double>(m.ops) / m.syncs : 0;
  }
  r.cpu_user_pct = m.cpu_user_pct;
  r.cpu_sys_pct = m.cpu_sys_pct;
  r.errors = m.errors;
  r.lag_blocked = m.lag_blocked;
  r.allocation_stalls = m.allocation_stalls;
  r.segments_created = m.segments_created;
  r.capped = m.capped;
  r.segments_released = m.segments_released;
  r.padding_bytes = m.padding_bytes;
  r.stored_ratio = m.payload_appended > 0 ? static_cast<double>(m.payload_stored) /
                                                static_cast<double>(m.payload_appended)
                                          : 0;
  r.backend_in_use = m.backend_in_use;
  r.block_size = m.block_size;
  r.sync_mean_us = m.sync.mean_ns / 1e3;
  r.sync_p50_us = m.sync.p50_ns / 1e3;
  r.sync_p99_us = m.sync.p99_ns / 1e3;
  // Notes explain a row's tail: stalls behind segment allocation or a
  // lagging periodic sync, a window cut short, a window with no appends.
  std::vector<std::string> notes;
  if (!p.config.metrics) notes.push_back("metrics off");
  if (m.capped) notes.push_back("capped at --max-bytes after " + fmt("%.2fs", m.elapsed_s));
  if (m.ops == 0) notes.push_back("no append completed in the window: the log stalled");
  if (m.allocation_stalls > 0) {
    notes.push_back(std::to_string(m.allocation_stalls) + " appends waited for a segment");
  }
  if (m.padding_bytes > 0 && m.syncs > 0) {
    notes.push_back(fmt("%.0f", static_cast<double>(m.padding_bytes) / m.syncs) +
                    " B tail padding per sync");
  }
  if (m.lag_blocked > 0) {
    notes.push_back(std::to_string(m.lag_blocked) + " appends waited for a lagging sync");
  }
  if (m.payload_appended > 0 && m.payload_stored != m.payload_appended) {
    notes.push_back("payload stored at " + fmt("%.1f%%", 100.0 * r.stored_ratio) +
                    " of its size (compression/encryption)");
  }
  for (const auto& n : notes) r.message += (r.message.empty() ? "" : "; ") + n;
  r.verified_records = v.records;
  r.verify_s = v.seconds;
  return r;
}

Row make_failed_row(const Point& p, const std::string& message) {
  Row r = base_row(p);
  r.status = "failed";
  r.message = message;
  r.errors = 1;
  return r;
}

Row make_skip_row(const Skip& s) {
  Row r;
  r.job = s.job;
  set_medium(r, *s.medium);
  r.backend = s.backend;
  r.segment_kind = s.segment_kind;
  r.mode = "*";
  r.size = "*";
  r.payload = "*";
  r.status = "skipped";
  r.message = s.message;
  return r;
}

std::vector<MetricsPair> metrics_pairs(const std::vector<Row>& rows) {
  // Rows that differ only in Config metrics share this key.
  auto key = [](const Row& r) {
    std::string c = r.config;
    for (const char* m : {"metrics=true", "metrics=false"}) {
      if (size_t at = c.find(m); at != std::string::npos) c.erase(at, std::string(m).size());
    }
    return r.job + "|" + r.medium + "|" + r.size + "|" + std::to_string(r.threads) + "|" +
           std::to_string(r.inflight) + "|" + std::to_string(r.batch) + "|" + data_label(r) + "|" +
           c;
  };
  std::vector<MetricsPair> pairs;
  for (const auto& on : rows) {
    if (on.status != "verified" || !on.metrics) continue;
    const std::string k = key(on);
    for (const auto& off : rows) {
      if (off.status != "verified" || off.metrics || key(off) != k) continue;
      MetricsPair p;
      p.on = on.index;
      p.off = off.index;
      p.label = label_of(on);
      p.on_ops = on.ops_per_s;
      p.off_ops = off.ops_per_s;
      p.ratio = off.ops_per_s > 0 ? on.ops_per_s / off.ops_per_s : 0;
      p.overhead_pct = (1 - p.ratio) * 100;
      pairs.push_back(p);
      break;
    }
  }
  return pairs;
}

std::string format_metrics_overhead(const std::vector<MetricsPair>& pairs) {
  std::string s;
  char line[256];
  std::snprintf(line, sizeof line, "%-3s %-3s %-34s %10s %10s %6s  %s\n", "on", "off", "point",
                "on op/s", "off op/s", "on/off", "metrics overhead");
  s += line;
  for (const auto& p : pairs) {
    std::snprintf(line, sizeof line, "%-3zu %-3zu %-34s %10.0f %10.0f %6.3f  %.1f%%\n", p.on, p.off,
                  p.label.c_str(), p.on_ops, p.off_ops, p.ratio, p.overhead_pct);
    s += line;
  }
  return s;
}

std::string data_label(const Row& r) {
  std::string s = r.payload;
  if (r.compression != "none") s += "+" + r.compression;
  if (r.encryption != "none") s += "+" + (r.encryption == "aes-256-gcm" ? "aes" : r.encryption);
  return s;
}

std::string table_header() {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%-3s %-6s %-18s %-8s %-6s %-15s %4s %4s %5s | %9s %7s %7s | %8s %8s %8s %8s %8s "
                "%8s | %8s %7s | %5s %5s | %3s | %s\n",
                "#", "medium", "backend/kind", "mode", "size", "data", "thr", "qd", "batch", "op/s",
                "MB/s", "B/rec", "mean", "p50", "p95", "p99", "p99.9", "max", "syncs/s", "rec/syn",
                "usr%", "sys%", "err", "status");
  // A line of group labels above the column names, each centred over its
  // group (widths from the format above).
  auto centre = [](const std::string& s, size_t width) {
    const size_t left = (width - s.size()) / 2;
    return std::string(left, ' ') + s + std::string(width - s.size() - left, ' ');
  };
  const std::string groups = centre("point", 77) + " |" + centre("rate", 27) + "|" +
                             centre("append latency, us", 55) + "|" + centre("syncs", 18) + "|" +
                             centre("% of 1 core", 13) + "|\n";
  return groups + buf;
}

std::string table_row(const Row& r) {
  char head[256];
  const std::string bk = r.backend + "/" + r.segment_kind;
  const bool skip = r.index == 0;
  std::snprintf(head, sizeof head, "%-3s %-6s %-18s %-8s %-6s %-15s %4s %4s %5s | ",
                r.index ? std::to_string(r.index).c_str() : "-", r.medium.c_str(), bk.c_str(),
                r.mode.c_str(), r.size.c_str(), skip ? "*" : data_label(r).c_str(),
                r.threads ? std::to_string(r.threads).c_str() : "*",
                skip ? "*" : std::to_string(r.inflight).c_str(),
                skip ? "*" : std::to_string(r.batch).c_str());
  if (r.status == "skipped") return head + std::string("skipped: ") + r.message + "\n";
  if (r.status != "verified") return head + std::string("FAILED: ") + r.message + "\n";
  char body[320];
  std::snprintf(
      body, sizeof body,
      "%9.0f %7s %7s | %8s %8s %8s %8s %8s %8s | %8s %7s | %5.0f %5.0f | %3llu | verified",
      r.ops_per_s, num(r.mb_per_s).c_str(),
      r.stored_per_record > 0 ? num(r.stored_per_record).c_str() : "-", num(r.mean_us).c_str(),
      num(r.p50_us).c_str(), num(r.p95_us).c_str(), num(r.p99_us).c_str(), num(r.p999_us).c_str(),
      num(r.max_us).c_str(), r.syncs_known ? fmt("%.0f", r.syncs_per_s).c_str() : "-",
      r.records_per_sync > 0 ? num(r.records_per_sync).c_str() : "-", r.cpu_user_pct, r.cpu_sys_pct,
      static_cast<unsigned long long>(r.errors));
  std::string line = head + std::string(body);
  if (!r.message.empty()) line += " (" + r.message + ")";
  return line + "\n";
}

nlohmann::json to_json(const Row& r) {
  nlohmann::json j;
  j["type"] = r.status == "skipped" ? "skip" : "point";
  if (r.index) j["index"] = r.index;
  j["job"] = r.job;
  j["medium"] = {
      {"name", r.medium}, {"fs", r.fs}, {"device", r.device}, {"detected", r.medium_desc}};
  j["backend"] = r.backend;
  j["segment_kind"] = r.segment_kind;
  j["status"] = r.status;
  if (!r.message.empty()) j["message"] = r.message;
  if (r.status == "skipped") return j;
  j["mode"] = r.mode;
  j["threads"] = r.threads;
  j["inflight"] = r.inflight;
  j["batch"] = r.batch;
  j["record_size"] = {{"min", r.size_min}, {"max", r.size_max}, {"label", r.size}};
  j["payload"] = r.payload;
  j["compression"] = r.compression;
  j["encryption"] = r.encryption;
  j["config"] = r.config;
  j["errors"] = r.errors;
  if (r.status != "verified") return j;
  j["verified"] = true;
  j["verified_records"] = r.verified_records;
  j["verify_s"] = r.verify_s;
  j["elapsed_s"] = r.elapsed_s;
  j["ops"] = r.ops;
  j["ops_per_s"] = r.ops_per_s;
  j["mb_per_s"] = r.mb_per_s;
  j["stored_bytes_per_record"] =
      r.stored_per_record > 0 ? nlohmann::json(r.stored_per_record) : nlohmann::json();
  j["stored_bytes"] = r.stored_bytes;
  j["stored_records"] = r.stored_records;
  if (r.engine_stored_per_record >= 0)
    j["engine_stored_bytes_per_record"] = r.engine_stored_per_record;
  j["latency_us"] = {{"mean", r.mean_us}, {"p50", r.p50_us},    {"p95", r.p95_us},
                     {"p99", r.p99_us},   {"p99.9", r.p999_us}, {"max", r.max_us}};
  j["metrics"] = r.metrics;
  if (r.syncs_known) {
    j["syncs"] = r.syncs;
    j["syncs_per_s"] = r.syncs_per_s;
    j["records_per_sync"] = r.records_per_sync;
  } else {
    j["syncs"] = j["syncs_per_s"] = j["records_per_sync"] = nullptr;
  }
  j["padding_bytes"] = r.padding_bytes;
  if (r.stored_ratio > 0) {
    j["stored_ratio"] = r.stored_ratio;
  } else {
    j["stored_ratio"] = nullptr;
  }
  j["backend_in_use"] = r.backend_in_use;
  j["block_size"] = r.block_size;
  j["sync_latency_us"] = {{"mean", r.sync_mean_us}, {"p50", r.sync_p50_us}, {"p99", r.sync_p99_us}};
  j["cpu_user_pct"] = r.cpu_user_pct;
  j["cpu_sys_pct"] = r.cpu_sys_pct;
  j["lag_blocked_appends"] = r.lag_blocked;
  j["allocation_stalls"] = r.allocation_stalls;
  j["segments_created"] = r.segments_created;
  if (!r.fio_unit.empty()) {
    j["fio"] = {{"unit", r.fio_unit},
                {"ceiling", r.fio_ceiling},
                {"ratio", r.fio_ratio},
                {"basis", r.fio_basis}};
    if (r.fio_round_p99_us > 0) {
      j["fio"]["round_p99_us"] = r.fio_round_p99_us;
      j["fio"]["p99_ratio"] = r.fio_p99_ratio;
    }
  }
  if (r.rocksdb_ops > 0) j["rocksdb"] = {{"ops_per_s", r.rocksdb_ops}, {"ratio", r.rocksdb_ratio}};
  j["segments_released"] = r.segments_released;
  j["capped"] = r.capped;
  return j;
}

std::string csv_header() {
  return "index,job,medium,fs,device,backend,segment_kind,mode,record_size,size_min,size_max,"
         "threads,inflight,batch,status,message,elapsed_s,ops,ops_per_s,mb_per_s,mean_us,p50_us,"
         "p95_us,p99_us,p999_us,max_us,syncs,syncs_per_s,records_per_sync,cpu_user_pct,"
         "cpu_sys_pct,errors,lag_blocked_appends,allocation_stalls,padding_bytes,sync_mean_us,sync_"
         "p99_us,capped,"
         "verified_records,fio_unit,fio_ceiling,fio_ratio,fio_round_p99_us,fio_p99_ratio,"
         "rocksdb_ops,rocksdb_ratio,metrics,payload,compression,encryption,"
         "stored_bytes_per_record,engine_stored_bytes_per_record,config\n";
}

std::string csv_row(const Row& r) {
  std::string s;
  auto add = [&](const std::string& v) { s += (s.empty() ? "" : ",") + csv_escape(v); };
  auto addn = [&](double v) { add(fmt("%.6g", v)); };
  add(r.index ? std::to_string(r.index) : "");
  add(r.job);
  add(r.medium);
  add(r.fs);
  add(r.device);
  add(r.backend);
  add(r.segment_kind);
  add(r.mode);
  add(r.size);
  add(std::to_string(r.size_min));
  add(std::to_string(r.size_max));
  add(std::to_string(r.threads));
  add(r.index ? std::to_string(r.inflight) : "");
  add(r.index ? std::to_string(r.batch) : "");
  add(r.status);
  add(r.message);
  for (double v : {r.elapsed_s, static_cast<double>(r.ops), r.ops_per_s, r.mb_per_s, r.mean_us,
                   r.p50_us, r.p95_us, r.p99_us, r.p999_us, r.max_us}) {
    addn(v);
  }
  for (double v : {static_cast<double>(r.syncs), r.syncs_per_s, r.records_per_sync}) {
    if (r.syncs_known) {
      addn(v);
    } else {
      add("");
    }
  }
  for (double v : {r.cpu_user_pct, r.cpu_sys_pct, static_cast<double>(r.errors),
                   static_cast<double>(r.lag_blocked), static_cast<double>(r.allocation_stalls),
                   static_cast<double>(r.padding_bytes), r.sync_mean_us, r.sync_p99_us}) {
    addn(v);
  }
  add(r.capped ? "true" : "false");
  add(std::to_string(r.verified_records));
  add(r.fio_unit);
  add(r.fio_unit.empty() ? "" : fmt("%.6g", r.fio_ceiling));
  add(r.fio_unit.empty() ? "" : fmt("%.4g", r.fio_ratio));
  add(r.fio_round_p99_us > 0 ? fmt("%.6g", r.fio_round_p99_us) : "");
  add(r.fio_round_p99_us > 0 ? fmt("%.4g", r.fio_p99_ratio) : "");
  add(r.rocksdb_ops > 0 ? fmt("%.6g", r.rocksdb_ops) : "");
  add(r.rocksdb_ops > 0 ? fmt("%.4g", r.rocksdb_ratio) : "");
  add(r.index ? (r.metrics ? "true" : "false") : "");
  add(r.index ? r.payload : "");
  add(r.compression);
  add(r.encryption);
  add(r.stored_per_record > 0 ? fmt("%.6g", r.stored_per_record) : "");
  add(r.engine_stored_per_record >= 0 ? fmt("%.6g", r.engine_stored_per_record) : "");
  add(r.config);
  return s + "\n";
}

}  // namespace bench
