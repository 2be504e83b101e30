// synclog-bench: a fio-like sweep of the synclog commit log. See --help, and
// docs/benchmarks.md for what the numbers mean.
//
// Flow: parse options (options.h) -> plan the points and probe the backends
// (sweep.h) -> for each point run it (runner.h) and verify it (verify.h) ->
// fio ceilings and ratios (fio.h), RocksDB baselines (rocksdb.h) -> plots
// (plot.h). Rows go out as they complete (report.h): the table on stdout, or
// JSON lines / CSV.
#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include "fio.h"
#include "options.h"
#include "plot.h"
#include "report.h"
#include "rocksdb.h"
#include "runner.h"
#include "sweep.h"
#include "units.h"
#include "verify.h"

namespace bench {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string first_line_of(const char* path, const char* prefix) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? line : trim(line.substr(colon + 1));
    }
  }
  return "unknown";
}

nlohmann::json machine_info() {
  utsname u{};
  ::uname(&u);
  return {{"kernel", u.release},
          {"cpus", std::thread::hardware_concurrency()},
          {"cpu_model", first_line_of("/proc/cpuinfo", "model name")},
          {"memory", first_line_of("/proc/meminfo", "MemTotal")}};
}

// Everything that goes out: stdout in the chosen shape, and the files in
// --out (table.txt always holds the human table).
class Output {
 public:
  explicit Output(const RunOptions& run) : run_(run) {
    if (run.out.empty()) return;
    std::filesystem::create_directories(run.out);
    jsonl_.open(run.out / "results.jsonl");
    csv_.open(run.out / "results.csv");
    table_.open(run.out / "table.txt");
    csv_ << csv_header();
    if (!jsonl_ || !csv_ || !table_)
      throw std::runtime_error("cannot write into " + run.out.string());
  }
  bool human() const { return !run_.json && !run_.csv; }

  // Human text: stdout (unless --json/--csv) and table.txt.
  void text(const std::string& s) {
    if (human()) {
      std::cout << s;
      std::cout.flush();
    }
    if (table_.is_open()) table_ << s << std::flush;
  }
  void json(const nlohmann::json& j) {
    const std::string line = j.dump() + "\n";
    if (run_.json) std::cout << line << std::flush;
    if (jsonl_.is_open()) jsonl_ << line << std::flush;
  }
  void row(const Row& r) {
    if (!header_done_) {
      text(table_header());
      if (run_.csv) std::cout << csv_header();
      header_done_ = true;
    }
    text(table_row(r));
    json(to_json(r));
    const std::string c = csv_row(r);
    if (run_.csv) std::cout << c << std::flush;
    if (csv_.is_open()) csv_ << c << std::flush;
  }

 private:
  const RunOptions& run_;
  std::ofstream jsonl_, csv_, table_;
  bool header_done_ = false;
};

void progress(const RunOptions& run, const std::string& line) {
  if (!run.quiet) std::cerr << "synclog-bench: " << line << std::endl;
}

int run_sweep(const Options& options) {
  const RunOptions& run = options.run;
  Plan plan = make_plan(options, /*dry=*/run.list);
  const std::string work = "synclog-bench-" + std::to_string(::getpid());

  if (run.list) {
    for (const auto& p : plan.points) {
      std::cout << p.label() << "  [" << p.job << "] " << p.config_text << "\n";
    }
    for (const auto& k : plan.skips) {
      std::cout << "skipped [" << k.job << "] " << k.medium->name << ": " << k.message << "\n";
    }
    for (const auto& n : plan.notes) std::cout << "note: " << n << "\n";
    if (run.fio != "off") std::cout << "fio profiles: " << run.fio_profiles.string() << "\n";
    std::cout << plan.points.size() << " points\n";
    return 0;
  }

  // make_plan's skips are values the library rejected; the probe's, backends.
  const size_t skipped_values = plan.skips.size();
  probe_backends(plan, work);
  const size_t skipped_backends = plan.skips.size() - skipped_values;
  const std::string skipped_text =
      std::to_string(skipped_backends) + " backend/medium pairs skipped" +
      (skipped_values == 0
           ? ""
           : ", " + std::to_string(skipped_values) +
                 " compression/encryption values skipped (rejected by the library)");

  const bool fio_on = run.fio == "on" || (run.fio == "auto" && fio_installed());
  if (run.fio == "on" && !fio_installed()) {
    throw std::runtime_error("--fio on, but fio is not installed (apt-get install fio)");
  }
  std::optional<FioCeilings> fio;
  if (fio_on) fio.emplace(run, work);
  // Batch and group points on fio media each add a short fio run (its
  // [layout] job writes 16 MiB first).
  auto fio_cost = [&](const Point& p) {
    return fio && fio->wants(*p.medium) && p.mode != "periodic" ? run.fio_runtime_s + 0.4 : 0.0;
  };
  const bool rocksdb_on = run.rocksdb == "on" || (run.rocksdb == "auto" && db_bench_installed());
  if (run.rocksdb == "on" && !db_bench_installed()) {
    throw std::runtime_error(
        "--rocksdb on, but db_bench is not on PATH (apt-get install rocksdb-tools)");
  }
  std::optional<RocksBaseline> rocksdb;
  if (rocksdb_on) rocksdb.emplace(run, work);
  double fio_s = 0;
  for (const auto& p : plan.points) fio_s += fio_cost(p);
  // One db_bench run per (medium, threads, record size) of batch points;
  // --duration is whole seconds, and opening the database takes ~0.3 s.
  double rocksdb_s = 0;
  std::set<std::tuple<const MediumInfo*, uint32_t, double>> baselines;
  for (const auto& p : plan.points) {
    if (rocksdb && rocksdb->wants(p.mode, *p.medium) &&
        baselines.insert({p.medium, p.threads, p.size.mean()}).second) {
      rocksdb_s += std::max(1.0, std::ceil(run.rocksdb_runtime_s)) + 0.3;
    }
  }
  assign_durations(plan, options, fio_s + rocksdb_s);

  Output out(run);
  const nlohmann::json machine = machine_info();
  double planned_s = rocksdb_s;
  for (const auto& p : plan.points) {
    planned_s += (p.ops > 0 ? 1 : p.duration_s + p.warmup_s) + kPointOverhead + fio_cost(p);
  }
  {
    nlohmann::json j{{"type", "run"},
                     {"machine", machine},
                     {"points", plan.points.size()},
                     {"fio", fio_on},
                     {"rocksdb", rocksdb_on},
                     {"skipped_backends", skipped_backends},
                     {"skipped_values", skipped_values}};
    for (const auto& m : plan.media) {
      j["media"].push_back(
          {{"name", m.name},
           {"dir", m.dir.string()},
           {"fs", m.fs_type},
           {"device", m.device},
           {"memory", m.memory},
           {"rotational", m.rotational ? nlohmann::json(*m.rotational) : nlohmann::json()},
           {"write_cache", m.write_cache},
           {"detected", m.describe()}});
    }
    out.json(j);
    std::string head = "synclog-bench: " + std::to_string(plan.points.size()) + " points";
    if (!plan.skips.empty()) head += " (" + skipped_text + ")";
    head += ", about " + format_eta(planned_s) + "\n";
    head += "machine: " + std::string(machine["cpu_model"]) + ", " +
            std::to_string(machine["cpus"].get<unsigned>()) + " cpus, " +
            std::string(machine["memory"]) + ", kernel " + std::string(machine["kernel"]) + "\n";
    for (const auto& m : plan.media)
      head += "medium " + m.name + ": " + m.dir.string() + " = " + m.describe() + "\n";
    for (const auto& n : plan.notes) head += "note: " + n + "\n";
    out.text(head + "\n");
  }

  std::vector<Row> rows;
  for (const auto& s : plan.skips) {
    rows.push_back(make_skip_row(s));
    out.row(rows.back());
  }

  const double sweep_start = now_s();
  double overhead = kPointOverhead;  // per point beyond its window; refined as points finish
  std::string failure;
  std::set<std::filesystem::path> key_files;  // written so far (--encryption)
  for (size_t i = 0; i < plan.points.size() && failure.empty(); ++i) {
    const Point& p = plan.points[i];
    double remaining = 0;
    for (size_t k = i; k < plan.points.size(); ++k) {
      remaining +=
          plan.points[k].duration_s + plan.points[k].warmup_s + overhead + fio_cost(plan.points[k]);
    }
    char what[128];
    std::snprintf(what, sizeof what, "[%zu/%zu, ETA %s] ", i + 1, plan.points.size(),
                  format_eta(remaining).c_str());
    progress(run, what + p.label() +
                      (p.ops > 0 ? " for " + std::to_string(p.ops) + " ops"
                                 : " for " + format_seconds(p.duration_s)));
    const double t0 = now_s();

    const auto dir = p.medium->dir / work / ("p" + std::to_string(p.index));
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    std::filesystem::create_directories(dir, ec);
    synclog::Config config = p.config;
    config.dir = dir;
    // One throwaway key per medium, outside every log directory (a log
    // directory holds only the log's own files).
    const auto key_file = p.medium->dir / work / "encryption.key";
    if (p.encryption != "none" && key_files.insert(key_file).second) write_key_file(key_file);
    std::string setup_error;
    if (auto r = apply_transforms(p, config, key_file); !r) {
      setup_error = r.error().message;
    } else if (auto valid = config.validate(); !valid) {
      setup_error = "Config with compression and encryption: " + valid.error().message;
    }

    Row row;
    Verification v;
    std::optional<Measurement> measurement;
    if (!setup_error.empty()) {
      row = make_failed_row(p, setup_error);
    } else if (auto measured = run_point(p, config); !measured) {
      row = make_failed_row(p, "Log::open failed: " + measured.error().describe());
    } else {
      measurement = std::move(*measured);
      if (measurement->errors == 0) v = verify_log(config, *measurement, p.size.max, p.payload);
      row = make_row(p, *measurement, v);
    }
    const double run_wall = now_s() - t0;
    if (fio) {
      if (auto q = fio->measure(row, *p.medium, [&](const std::string& s) { progress(run, s); })) {
        row.fio_unit = q->unit;
        row.fio_ceiling = q->ceiling;
        row.fio_ratio = q->ratio;
        row.fio_basis = q->basis;
        row.fio_round_p99_us = q->round_p99_us;
        row.fio_p99_ratio = q->p99_ratio;
      }
    }
    if (rocksdb) rocksdb->measure(&row, *p.medium, [&](const std::string& s) { progress(run, s); });
    rows.push_back(row);
    out.row(row);
    if (row.status != "verified") {
      failure = "point " + std::to_string(p.index) + " (" + p.label() + ") FAILED: " + row.message +
                "\n  its log is kept in " + dir.string() + " (inspect it with synclog-dump)";
      break;
    }
    if (!run.keep) std::filesystem::remove_all(dir, ec);
    const double wall = run_wall;
    const double window = p.ops > 0 ? row.elapsed_s : p.duration_s + p.warmup_s;
    char done[256];
    std::snprintf(done, sizeof done,
                  "  %.0f op/s; verified %llu records; %.1fs in all: open %.2fs, run %.2fs, "
                  "close %.2fs, verify %.2fs (of which reopen %.2fs)",
                  row.ops_per_s, static_cast<unsigned long long>(row.verified_records), wall,
                  measurement->open_s, window, measurement->close_s, v.seconds, v.open_s);
    progress(run, done);
    overhead = (overhead * static_cast<double>(i) + std::max(0.0, wall - window)) /
               static_cast<double>(i + 1);
  }
  progress(run, "sweep took " + format_eta(now_s() - sweep_start));

  if (fio) {
    for (const auto& r : fio->runs()) {
      out.json({{"type", "fio"},
                {"medium", r.medium},
                {"profile", r.profile},
                {"bs", r.bs},
                {"ok", r.ok},
                {"error", r.error},
                {"iops", r.iops},
                {"bw_bytes", r.bw_bytes},
                {"write_lat_us", r.write_lat_us},
                {"sync_lat_us", r.sync_lat_us},
                {"write_p99_us", r.write_p99_us},
                {"sync_p99_us", r.sync_p99_us}});
    }
    if (!fio->runs().empty()) {
      out.text("\nengine / fio ceiling (fio " + format_seconds(run.fio_runtime_s) +
               " right after each batch point, on already-written blocks; 1.00 = the raw "
               "pattern's rate; p99: the point's append p99 against one write+fdatasync round's, "
               "estimated as fio's write p99 + fdatasync p99):\n" +
               format_ratios(fio->ratios(), fio->runs()));
    } else if (failure.empty()) {
      out.text(
          "\nfio: no verified point on a medium chosen for fio (--fio-media; memory media "
          "are left out by default)\n");
    }
  }

  if (rocksdb) {
    for (const auto& r : rocksdb->runs()) {
      out.json({{"type", "rocksdb"},
                {"medium", r.medium},
                {"threads", r.threads},
                {"record_size", r.record},
                {"value_size", r.value_size},
                {"command", r.command},
                {"raw", r.raw.string()},
                {"ok", r.ok},
                {"error", r.error},
                {"ops_per_s", r.ops_per_s},
                {"micros_per_op", r.micros_per_op}});
    }
    if (!rocksdb->runs().empty()) {
      out.text(
          "\nengine / RocksDB (db_bench fillrandom --sync=true, same threads and record size "
          "incl. a 16-byte key, no compression; 1.00 = RocksDB's durable write rate):\n" +
          format_rocksdb(rows, rocksdb->runs()));
    } else if (failure.empty() && run.rocksdb == "on") {
      out.text(
          "\nrocksdb: no verified batch point on a medium chosen for db_bench (--fio-media; "
          "memory media are left out by default)\n");
    }
  }

  if (const auto pairs = metrics_pairs(rows); !pairs.empty()) {
    for (const auto& p : pairs) {
      out.json({{"type", "metrics_overhead"},
                {"on", p.on},
                {"off", p.off},
                {"on_ops_per_s", p.on_ops},
                {"off_ops_per_s", p.off_ops},
                {"ratio", p.ratio},
                {"overhead_pct", p.overhead_pct}});
    }
    out.text(
        "\nmetrics on / off (points that differ only in Config metrics; overhead = op/s lost "
        "with metrics on, within run-to-run noise when small or negative):\n" +
        format_metrics_overhead(pairs));
  }

  if (!run.out.empty() && run.plot != "off" && !rows.empty()) {
    if (gnuplot_installed()) {
      std::string error;
      auto pngs = write_plots(rows, run.out, &error);
      std::string s;
      for (const auto& png : pngs) s += (s.empty() ? "" : ", ") + png.string();
      if (!pngs.empty()) out.text("\nplots: " + s + "\n");
      if (!error.empty()) progress(run, "plot: " + error);
    } else if (run.plot == "on") {
      throw std::runtime_error(
          "--plot on, but gnuplot is not installed (apt-get install gnuplot-nox)");
    } else {
      progress(run, "gnuplot not installed: no plots");
    }
  }

  size_t verified = 0;
  for (const auto& r : rows) verified += r.status == "verified";
  if (!run.keep) {
    for (const auto& m : plan.media) {
      std::error_code ec;
      if (failure.empty()) std::filesystem::remove_all(m.dir / work, ec);
    }
  }
  if (!failure.empty()) {
    std::cerr << "\nsynclog-bench: VERIFICATION FAILED, sweep stopped\n  " << failure << "\n";
    out.text("\nFAILED: " + failure + "\n");
    return 1;
  }
  out.text("\n" + std::to_string(verified) + " points verified, " + skipped_text +
           (run.out.empty() ? "" : "; results in " + run.out.string()) + "\n");
  return 0;
}

}  // namespace
}  // namespace bench

int main(int argc, char** argv) {
  int code = 0;
  auto options = bench::parse_options(argc, argv, &code);
  if (!options) return code;
  try {
    return bench::run_sweep(*options);
  } catch (const std::exception& e) {
    std::cerr << "synclog-bench: error: " << e.what() << "\n";
    return 2;
  }
}
