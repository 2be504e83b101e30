#include "rocksdb.h"

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "fio.h"
#include "units.h"

namespace bench {
namespace {

constexpr uint64_t kKeySize = 16;

// The last few lines of db_bench's stderr, without its "... finished N ops"
// progress lines: where it says what went wrong.
std::string stderr_tail(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  std::replace(text.begin(), text.end(), '\r', '\n');
  std::vector<std::string> lines;
  for (const auto& l : split(text, '\n')) {
    if (l.rfind("...", 0) != 0) lines.push_back(l);
  }
  std::string s;
  for (size_t i = lines.size() > 3 ? lines.size() - 3 : 0; i < lines.size(); ++i)
    s += (s.empty() ? "" : " / ") + lines[i];
  return s;
}

}  // namespace

bool db_bench_installed() {
  int status = 0;
  run_capture("command -v db_bench >/dev/null 2>&1", &status);
  return status == 0;
}

std::string parse_db_bench(const std::string& out, const std::string& benchmark, double* ops_per_s,
                           double* micros_per_op) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    // "fillrandom   :     345.114 micros/op 11575 ops/sec 1.036 seconds 11996 operations; ..."
    if (line.rfind(benchmark, 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos ||
        !trim(line.substr(benchmark.size(), colon - benchmark.size())).empty()) {
      continue;
    }
    double micros = 0, ops = 0;
    if (std::sscanf(line.c_str() + colon + 1, " %lf micros/op %lf ops/sec", &micros, &ops) != 2) {
      return "cannot read db_bench's summary line '" + line + "'";
    }
    if (ops <= 0) return "db_bench reported no writes: '" + line + "'";
    *ops_per_s = ops;
    *micros_per_op = micros;
    return "";
  }
  return "no '" + benchmark + " :' summary line in db_bench's output";
}

RocksBaseline::RocksBaseline(const RunOptions& run, std::string work_name)
    : run_(run), work_(std::move(work_name)) {}

RocksBaseline::~RocksBaseline() {
  std::error_code ec;
  for (const auto& dir : dirs_) std::filesystem::remove_all(dir, ec);
}

bool RocksBaseline::wants(const std::string& mode, const MediumInfo& m) const {
  return mode == "batch" && wants_medium(run_, m);
}

const RocksRun* RocksBaseline::measure(Row* row, const MediumInfo& medium,
                                       const std::function<void(const std::string&)>& progress) {
  if (row->status != "verified" || !wants(row->mode, medium)) return nullptr;
  const uint64_t record =
      static_cast<uint64_t>(std::llround((row->size_min + row->size_max) / 2.0));
  const auto key = std::make_tuple(medium.name, row->threads, record);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    RocksRun r;
    r.medium = medium.name;
    r.threads = row->threads;
    r.record = record;
    r.value_size = record > kKeySize ? record - kKeySize : 1;
    const auto work = medium.dir / work_;
    const auto db = work / ("rocksdb-" + std::to_string(r.threads));
    const auto err = work / ("rocksdb-" + std::to_string(r.threads) + ".stderr");
    std::error_code ec;
    std::filesystem::create_directories(work, ec);
    std::filesystem::remove_all(db, ec);
    dirs_.insert(db);
    const int seconds = std::max(1, static_cast<int>(std::ceil(run_.rocksdb_runtime_s - 1e-9)));
    r.command =
        "db_bench --benchmarks=fillrandom --sync=true --threads=" + std::to_string(r.threads) +
        " --key_size=" + std::to_string(kKeySize) +
        " --value_size=" + std::to_string(r.value_size) +
        " --compression_type=none --disable_auto_compactions=true --db=" +
        shell_quote(db.string()) + " --num=1000000 --duration=" + std::to_string(seconds) +
        " --ops_between_duration_checks=10 --histogram=false --statistics=false";
    if (progress) {
      progress("  db_bench fillrandom --sync=true x" + std::to_string(r.threads) + " " +
               format_bytes(record) + " on " + medium.name);
    }
    int status = 0;
    const std::string out = run_capture(r.command + " 2>" + shell_quote(err.string()), &status);
    if (!run_.out.empty()) {
      std::filesystem::create_directories(run_.out / "rocksdb", ec);
      r.raw =
          run_.out / "rocksdb" /
          (medium.name + "-t" + std::to_string(r.threads) + "-" + std::to_string(record) + "B.txt");
      std::ofstream(r.raw) << out;
    }
    if (status != 0) {
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      r.error = "db_bench failed (exit status " + std::to_string(code) + "): " + stderr_tail(err);
      if (code == 127) r.error += " (is rocksdb-tools installed?)";
    } else {
      r.error = parse_db_bench(out, "fillrandom", &r.ops_per_s, &r.micros_per_op);
      r.ok = r.error.empty();
    }
    std::filesystem::remove_all(db, ec);
    std::filesystem::remove(err, ec);
    runs_.push_back(std::move(r));
    it = cache_.emplace(key, runs_.size() - 1).first;
  }
  const RocksRun& r = runs_[it->second];
  if (r.ok) {
    row->rocksdb_ops = r.ops_per_s;
    row->rocksdb_ratio = row->ops_per_s / r.ops_per_s;
  }
  return &r;
}

std::string format_rocksdb(const std::vector<Row>& rows, const std::vector<RocksRun>& runs) {
  std::string s;
  for (const auto& r : runs) {
    if (!r.ok) {
      s += "db_bench x" + std::to_string(r.threads) + " " + format_bytes(r.record) + " on " +
           r.medium + ": " + r.error + "\n";
    }
  }
  char line[256];
  bool header = false;
  for (const auto& r : rows) {
    if (r.rocksdb_ops <= 0) continue;
    if (!header) {
      std::snprintf(line, sizeof line, "%-3s %-34s %12s %12s %6s\n", "#", "point", "engine",
                    "rocksdb", "ratio");
      s += line;
      header = true;
    }
    std::string label = r.medium + " " + r.backend + "/" + r.segment_kind + " " + r.mode + " " +
                        r.size + " x" + std::to_string(r.threads);
    if (const std::string d = data_label(r); d != "random") label += " " + d;
    std::snprintf(line, sizeof line, "%-3zu %-34s %7.0f op/s %7.0f op/s %6.2f\n", r.index,
                  label.c_str(), r.ops_per_s, r.rocksdb_ops, r.rocksdb_ratio);
    s += line;
  }
  return s;
}

}  // namespace bench
