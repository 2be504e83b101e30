#include "fio.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "units.h"

namespace bench {
namespace {

constexpr const char* kSyncWrite = "sync-write-fdatasync.fio";
constexpr const char* kBandwidth = "large-block-bandwidth.fio";
constexpr uint64_t kBandwidthBs = 1ull << 20;

// fio prints percentiles as "99.000000": value in ns; 0 when absent.
double p99_us(const nlohmann::json& lat) {
  if (!lat.contains("percentile")) return 0;
  return lat["percentile"].value("99.000000", 0.0) / 1e3;
}

}  // namespace

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string run_capture(const std::string& command, int* status) {
  std::string out;
  FILE* f = ::popen(command.c_str(), "r");
  if (!f) {
    *status = -1;
    return "popen failed";
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  *status = ::pclose(f);
  return out;
}

bool wants_medium(const RunOptions& run, const MediumInfo& m) {
  if (run.fio_media.empty()) return !m.memory;
  for (const auto& n : run.fio_media) {
    if (n == m.name) return true;
  }
  return false;
}

std::string parse_fio_json(std::string json, FioRun* r) {
  json.erase(0, std::min(json.size(), json.find('{')));
  try {
    const auto doc = nlohmann::json::parse(json);
    const auto& jobs = doc.at("jobs");
    if (!jobs.is_array() || jobs.empty()) return "fio's JSON holds no jobs";
    const auto& job = jobs.back();  // the timed job follows [layout]
    const auto& w = job.at("write");
    r->iops = w.at("iops").get<double>();
    r->bw_bytes = w.at("bw_bytes").get<double>();
    r->write_lat_us = w.at("clat_ns").at("mean").get<double>() / 1e3;
    r->write_p99_us = p99_us(w.at("clat_ns"));
    if (job.contains("sync") && job["sync"].contains("lat_ns")) {
      r->sync_lat_us = job["sync"]["lat_ns"].value("mean", 0.0) / 1e3;
      r->sync_p99_us = p99_us(job["sync"]["lat_ns"]);
    }
  } catch (const std::exception& e) {
    return std::string("cannot read fio's JSON: ") + e.what();
  }
  return r->iops > 0 ? "" : "fio reported no writes";
}

bool fio_installed() {
  int status = 0;
  run_capture("fio --version 2>/dev/null", &status);
  return status == 0;
}

FioRun run_fio(const std::filesystem::path& profile, const std::filesystem::path& dir, uint64_t bs,
               double runtime_s, const std::filesystem::path& raw_json) {
  FioRun r;
  r.profile = profile.filename().string();
  r.bs = bs;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const auto out = raw_json.empty() ? dir / "fio.json" : raw_json;
  char runtime[32];
  std::snprintf(runtime, sizeof runtime, "%.0fms", std::max(1.0, runtime_s * 1000));
  const std::string cmd = "FIO_DIR=" + shell_quote(dir.string()) + " FIO_BS=" + std::to_string(bs) +
                          " FIO_SIZE=16m FIO_RUNTIME=" + runtime +
                          " fio --output-format=json --output=" + shell_quote(out.string()) + " " +
                          shell_quote(profile.string()) + " 2>&1";
  int status = 0;
  const std::string text = run_capture(cmd, &status);
  std::ifstream in(out);
  if (status != 0 || !in) {
    r.error = "fio failed (status " + std::to_string(status) + "): " + text.substr(0, 400);
    return r;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  r.error = parse_fio_json(ss.str(), &r);
  r.ok = r.error.empty();
  if (raw_json.empty()) std::filesystem::remove(out, ec);
  return r;
}

FioCeilings::FioCeilings(const RunOptions& run, std::string work_name)
    : run_(run), work_(std::move(work_name)) {}

FioCeilings::~FioCeilings() {
  std::error_code ec;
  for (const auto& dir : dirs_) std::filesystem::remove_all(dir, ec);
}

bool FioCeilings::wants(const MediumInfo& m) const { return wants_medium(run_, m); }

std::optional<FioRatio> FioCeilings::measure(
    const Row& row, const MediumInfo& medium,
    const std::function<void(const std::string&)>& progress) {
  if (row.status != "verified" || !wants(medium)) return std::nullopt;
  const bool periodic = row.mode == "periodic";
  const uint64_t record = static_cast<uint64_t>(std::llround((row.size_min + row.size_max) / 2.0));
  const uint64_t bs = periodic ? kBandwidthBs : record * row.threads;
  const std::string profile = periodic ? kBandwidth : kSyncWrite;

  // Bandwidth is measured once per medium; each batch/group point gets its
  // own sync-write run right after it, so both see the device in the same
  // state (a shared or virtual disk drifts by several x within minutes).
  const FioRun* f = nullptr;
  if (periodic) {
    auto it = bandwidth_.find(medium.name);
    if (it != bandwidth_.end()) f = &runs_[it->second];
  }
  if (!f) {
    if (progress) progress("  fio " + profile + " bs=" + format_bytes(bs) + " on " + medium.name);
    std::filesystem::path raw;
    if (!run_.out.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(run_.out / "fio", ec);
      const std::string stem = profile.substr(0, profile.size() - 4);
      raw = run_.out / "fio" /
            (periodic ? medium.name + "-" + stem + ".json"
                      : "p" + std::to_string(row.index) + "-" + stem + "-" + std::to_string(bs) +
                            ".json");
    }
    const auto dir = medium.dir / work_ / "fio";
    dirs_.insert(dir);
    FioRun r = run_fio(run_.fio_profiles / profile, dir, bs, run_.fio_runtime_s, raw);
    r.medium = medium.name;
    runs_.push_back(r);
    if (periodic) bandwidth_[medium.name] = runs_.size() - 1;
    f = &runs_.back();
  }
  if (!f->ok) return std::nullopt;
  FioRatio q;
  q.point = row.index;
  q.label = row.medium + " " + row.backend + "/" + row.segment_kind + " " + row.mode + " " +
            row.size + " x" + std::to_string(row.threads);
  if (const std::string d = data_label(row); d != "random") q.label += " " + d;
  q.medium = medium.name;
  if (periodic) {
    q.unit = "MB/s";
    q.engine = row.mb_per_s;
    q.ceiling = f->bw_bytes / 1e6;
    q.basis = "fio sequential " + format_bytes(bs) + " writes + fdatasync every 8";
  } else {
    q.unit = "op/s";
    q.engine = row.ops_per_s;
    q.ceiling = row.threads * f->iops;
    char b[256];
    std::snprintf(b, sizeof b, "%u x %.0f write+fdatasync rounds/s at %s", row.threads, f->iops,
                  format_bytes(bs).c_str());
    q.basis = b;
    if (f->write_p99_us > 0 && f->sync_p99_us > 0) {
      q.engine_p99_us = row.p99_us;
      q.round_p99_us = f->write_p99_us + f->sync_p99_us;
      q.p99_ratio = q.engine_p99_us / q.round_p99_us;
      std::snprintf(b, sizeof b,
                    "; round p99 ~ write p99 %.0f + fdatasync p99 %.0f us (upper-bound estimate)",
                    f->write_p99_us, f->sync_p99_us);
      q.basis += b;
    }
  }
  q.ratio = q.ceiling > 0 ? q.engine / q.ceiling : 0;
  ratios_.push_back(q);
  return q;
}

std::string format_ratios(const std::vector<FioRatio>& ratios, const std::vector<FioRun>& runs) {
  std::string s;
  char line[512];
  for (const auto& r : runs) {
    if (!r.ok)
      s += "fio " + r.profile + " bs=" + format_bytes(r.bs) + " on " + r.medium + ": " + r.error +
           "\n";
  }
  if (ratios.empty()) return s;
  std::snprintf(line, sizeof line, "%-3s %-34s %12s %12s %6s | %9s %9s %6s | %s\n", "#", "point",
                "engine", "fio ceiling", "ratio", "p99 us", "round p99", "ratio", "ceiling from");
  s += line;
  for (const auto& r : ratios) {
    char p99[64] = "        -         -      -";
    if (r.round_p99_us > 0) {
      std::snprintf(p99, sizeof p99, "%9.0f %9.0f %6.2f", r.engine_p99_us, r.round_p99_us,
                    r.p99_ratio);
    }
    std::snprintf(line, sizeof line, "%-3zu %-34s %7.0f %-4s %7.0f %-4s %6.2f | %s | %s\n", r.point,
                  r.label.c_str(), r.engine, r.unit.c_str(), r.ceiling, r.unit.c_str(), r.ratio,
                  p99, r.basis.c_str());
    s += line;
  }
  return s;
}

}  // namespace bench
