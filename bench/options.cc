#include "options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>

#include "record.h"
#include "synclog/config.h"
#include "units.h"

#ifndef SYNCLOG_FIO_PROFILES
#define SYNCLOG_FIO_PROFILES "fio-profiles"
#endif

namespace bench {
namespace {

// An installed synclog-bench finds the profiles installed beside it
// (<prefix>/share/synclog/fio-profiles); one in the build tree, the source's.
std::filesystem::path default_fio_profiles() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto installed = exe.parent_path().parent_path() / "share" / "synclog" / "fio-profiles";
    if (std::filesystem::is_directory(installed, ec)) return installed;
  }
  return SYNCLOG_FIO_PROFILES;
}

enum class Scope { job, run };

struct Key {
  const char* name;
  const char* def;   // built-in default ("" = unset)
  const char* type;  // shown in --help
  const char* help;
  Scope scope;
  bool flag = false;
};

constexpr Key kKeys[] = {
    {"media", "disk=bench-data,ram=/dev/shm/synclog-bench", "NAME=DIR,...",
     "Named directories to run on (created if missing); each point uses a fresh subdirectory, "
     "removed after it is verified",
     Scope::job},
    {"threads", "1,4,16", "N,...", "Writer threads per point", Scope::job},
    {"backend", "all", "LIST",
     "Sync backends: msync, msync-pool, uring, aio, pwrite, auto, or all (the first five). One "
     "this build or machine cannot run is reported once per medium as 'skipped: <reason>'",
     Scope::job},
    {"segment-kind", "auto", "LIST",
     "auto (each backend's own kind: msync and msync-pool mmap, uring and aio direct, pwrite "
     "buffered) or mmap, direct, buffered; pairs a backend cannot sync are left out",
     Scope::job},
    {"mode", "batch,periodic", "LIST",
     "Sync modes: batch and group appends return once durable (latency = ack latency); periodic "
     "appends return at once",
     Scope::job},
    {"size", "128,4KiB", "LIST",
     "Record sizes: fixed (128, 4KiB) or ranges drawn uniformly per record (100-4000); 32B "
     "minimum",
     Scope::job},
    {"segment-size", "", "LIST", "Segment sizes (Config segment_size); default: Config's (32MiB)",
     Scope::job},
    {"sync-threads", "", "LIST", "Config sync_threads values (msync-pool); default: Config's",
     Scope::job},
    {"queue-depth", "", "LIST", "Config queue_depth values (uring, aio); default: Config's",
     Scope::job},
    {"syncs-in-flight", "", "LIST",
     "Config syncs_in_flight values (uring, aio in batch mode): syncs pipelined on the device; "
     "default: Config's (1)",
     Scope::job},
    {"metrics", "", "LIST",
     "Config metrics values (on, off): sweep with the log's latency histograms and append "
     "counters on and off; pairs that differ only in metrics get an overhead line at the end; "
     "default: Config's (on)",
     Scope::job},
    {"inflight", "0", "N,...",
     "Like fio's iodepth: each writer keeps N append_async() calls outstanding and latency is "
     "from the call to its completion callback (the ack); 0: blocking append()",
     Scope::job},
    {"batch", "1", "K,...",
     "Records per write batch: K > 1 appends K records at a time with append_batch() "
     "(append_batch_async() when --inflight > 0); op/s and latency count records",
     Scope::job},
    {"payload", "random", "LIST",
     "Record contents: random (incompressible bytes) or text (log lines of key=value pairs from "
     "a fixed vocabulary, about 2.4x with LZ4 at 4KiB; docs/benchmarks.md)",
     Scope::job},
    {"compression", "none", "LIST",
     "Config compression values (none, lz4, zstd); none sets no key. A value the library "
     "rejects is one 'skipped: <its error>' row per job and medium",
     Scope::job},
    {"encryption", "none", "LIST",
     "Config encryption values (none, aes-256-gcm); for a cipher the bench writes a throwaway "
     "random key file (mode 0600) beside the point directories and sets encryption_key_file. "
     "none sets no key; a value the library rejects is a 'skipped' row as for --compression",
     Scope::job},
    {"config", "", "KEY=V,...",
     "Any other Config keys for every point, e.g. interval=5ms,prezero=false (docs/config.md); "
     "errors name the key",
     Scope::job},
    {"duration", "auto", "TIME|auto",
     "Measured time per point (2s, 500ms); auto spreads --budget over the runnable points, 0.75s "
     "to 4s each",
     Scope::job},
    {"ops", "0", "N",
     "If > 0: run each point for this many appends (split over the threads) "
     "instead of a duration; no warmup",
     Scope::job},
    {"warmup", "200ms", "TIME", "Unmeasured appends before each point's window", Scope::job},
    {"retain", "2", "N",
     "While a point runs, release the segments more than N behind the slowest writer, as a "
     "database truncates its log after a flush: disk use stays near (N + spares) x segment "
     "size and released files are recycled. Verification then checks every record from the "
     "first retained segment on. 0: never release",
     Scope::job},
    {"max-bytes", "0", "BYTES",
     "If > 0: end a point early once its writers appended this many payload bytes; the row "
     "notes 'capped'",
     Scope::job},
    {"out", "", "DIR",
     "Write results.jsonl, results.csv, table.txt, fio/*.json, rocksdb/*.txt and plots "
     "(plot-*.png) here",
     Scope::run},
    {"json", "", "", "Print JSON lines on stdout instead of the table", Scope::run, true},
    {"csv", "", "", "Print CSV on stdout instead of the table", Scope::run, true},
    {"plot", "auto", "auto|on|off",
     "PNG plots via gnuplot into --out (auto: when --out is set and gnuplot is installed)",
     Scope::run},
    {"fio", "auto", "auto|on|off",
     "Measure fio's raw ceiling on --fio-media right after each batch/group point (sync-write "
     "at T x record size) and once per medium for periodic points (bandwidth), and print "
     "engine/fio ratios at the end; for batch/group also the append p99 against fio's write "
     "p99 + fdatasync p99 (auto: when fio is installed)",
     Scope::run},
    {"fio-profiles", SYNCLOG_FIO_PROFILES, "DIR", "Where the fio job files are", Scope::run},
    {"fio-runtime", "1s", "TIME", "Runtime of each fio job", Scope::run},
    {"fio-media", "", "NAME,...",
     "Media to run fio and db_bench (--rocksdb) on; default: every medium that is not "
     "memory (tmpfs, ramfs)",
     Scope::run},
    {"rocksdb", "auto", "auto|on|off",
     "RocksDB baseline for verified batch points on --fio-media: once per (medium, threads, "
     "record size) runs `db_bench --benchmarks=fillrandom --sync=true --threads=T --key_size=16 "
     "--value_size=<record size - 16, at least 1> --compression_type=none "
     "--disable_auto_compactions=true --db=<medium dir>/synclog-bench-<pid>/rocksdb-T "
     "--num=1000000 --duration=<--rocksdb-runtime, whole seconds> "
     "--ops_between_duration_checks=10 --histogram=false --statistics=false`, removes the "
     "database, and prints engine op/s / RocksDB op/s; stdout saved in --out/rocksdb/ (auto: "
     "when db_bench is on PATH; Debian package rocksdb-tools)",
     Scope::run},
    {"rocksdb-runtime", "1s", "TIME",
     "db_bench's --duration, rounded up to whole seconds (at least 1)", Scope::run},
    {"budget", "3m", "TIME",
     "duration=auto: the sweep's wall time, spread over the runnable points after their warmup, "
     "about 0.45s each of open, close and verification, and the fio runs",
     Scope::run},
    {"keep", "", "", "Keep each point's log directory (for synclog-dump)", Scope::run, true},
    {"list", "", "", "Print the planned points and exit", Scope::run, true},
    {"quiet", "", "", "No progress lines on stderr", Scope::run, true},
};

constexpr const char* kFooter = R"(
Lists are comma-separated; every combination of media x backend x segment-kind x mode x size x
segment-size x sync-threads x queue-depth x metrics x compression x encryption x payload x
threads x inflight x batch is one point.
Sizes take B, KiB (k), MiB (m), GiB (g); times take us, ms, s.

Job file (like fio): an INI file whose keys are the flag names without dashes.
  [global]
  media=disk=/var/lib/x,ram=/dev/shm/x
  duration=3s
  [small-batch]
  mode=batch
  size=128
  [large-periodic]
  mode=periodic
  size=4KiB
Each section other than [global] is a job, run in order. A value comes from, last wins: the
default, [global], the job's section, the command line.

Each point: T writer threads append records (thread, seq, length, pattern) for the duration;
then the log is closed, reopened and replayed, and every acknowledged record must come back
intact and in order ("verified"). A point that fails verification stops the sweep with exit 1
and prints no throughput for it.

Exit status: 0 all points verified (or skipped), 1 a point failed (the sweep stops there),
2 bad flags or values, or a medium directory that cannot hold a log.
Examples:
  synclog-bench --media ram=/dev/shm/x --threads 1,2,4 --mode batch --size 128 --duration 2s
  synclog-bench --media disk=/mnt/nvme/x --backend msync --config interval=5ms --json
  synclog-bench jobs.ini --out results
)";

const Key* find_key(const std::string& name) {
  for (const auto& k : kKeys) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

std::string known_keys(Scope scope) {
  std::string s;
  for (const auto& k : kKeys) {
    if (k.scope == scope || scope == Scope::run) s += (s.empty() ? "" : ", ") + std::string(k.name);
  }
  return s;
}

struct Value {
  std::string text;
  std::string origin;  // "--threads", "jobs.ini:4 [small]", "default"
};
using Values = std::map<std::string, Value>;

struct Section {
  std::string name;
  Values values;
};

struct Failure {
  std::string message;
};

[[noreturn]] void fail(const std::string& message) { throw Failure{message}; }

std::vector<Section> read_job_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) fail("cannot read job file '" + path.string() + "'");
  std::vector<Section> sections{{"global", {}}};
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string where = path.filename().string() + ":" + std::to_string(n);
    std::string t = trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t.front() == '[') {
      if (t.back() != ']' || t.size() < 3) fail(where + ": bad section header '" + t + "'");
      std::string name = trim(std::string_view(t).substr(1, t.size() - 2));
      if (name == "global") {
        if (sections.size() > 1) fail(where + ": [global] must come before the jobs");
        continue;
      }
      for (const auto& s : sections) {
        if (s.name == name) fail(where + ": job [" + name + "] appears twice");
      }
      sections.push_back({name, {}});
      continue;
    }
    const size_t eq = t.find('=');
    if (eq == std::string::npos) fail(where + ": expected key=value or [section], got '" + t + "'");
    std::string key = trim(std::string_view(t).substr(0, eq));
    std::replace(key.begin(), key.end(), '_', '-');
    Section& s = sections.back();
    const Key* k = find_key(key);
    if (!k || key == "list") {
      fail(where + ": unknown key '" + key + "' (known: " + known_keys(Scope::run) + ")");
    }
    if (k->scope == Scope::run && s.name != "global") {
      fail(where + ": key '" + key +
           "' applies to the whole run: put it in [global] or on the "
           "command line, not in job [" +
           s.name + "]");
    }
    s.values[key] = Value{trim(std::string_view(t).substr(eq + 1)), where + " [" + s.name + "]"};
  }
  return sections;
}

// Wraps a parse failure with the key and where its value came from.
[[noreturn]] void bad_value(const std::string& key, const Value& v, const std::string& why) {
  const std::string from = v.origin.rfind("--", 0) == 0 ? v.origin : key + " (" + v.origin + ")";
  fail(from + ": " + why);
}

bool as_bool(const std::string& key, const Value& v) {
  if (v.text.empty() || v.text == "true" || v.text == "1" || v.text == "on") return true;
  if (v.text == "false" || v.text == "0" || v.text == "off") return false;
  bad_value(key, v, "'" + v.text + "' is not true or false");
}

double as_seconds(const std::string& key, const Value& v, bool allow_zero) {
  double s = 0;
  if (auto e = parse_seconds(v.text, &s); !e.empty()) bad_value(key, v, e);
  if (s < 0 || (!allow_zero && s == 0)) bad_value(key, v, "must be greater than 0");
  return s;
}

std::string as_choice(const std::string& key, const Value& v,
                      std::initializer_list<const char*> ok) {
  std::string list;
  for (const char* c : ok) {
    if (v.text == c) return v.text;
    list += (list.empty() ? "" : " | ") + std::string(c);
  }
  bad_value(key, v, "'" + v.text + "' is not one of " + list);
}

// Each value must be one Config accepts for `config_key`: the library's own
// message names the key and the allowed values.
std::vector<std::string> as_config_list(const std::string& key, const Value& v,
                                        const char* config_key) {
  std::vector<std::string> out = split(v.text);
  for (const auto& item : out) {
    synclog::Config c;
    if (auto r = c.set(config_key, item); !r) bad_value(key, v, r.error().message);
  }
  return out;
}

JobOptions make_job(const std::string& name, const Values& values) {
  JobOptions job;
  job.name = name;
  auto get = [&](const char* key) -> const Value& { return values.at(key); };

  {
    const Value& v = get("media");
    std::set<std::string> seen;
    for (const auto& item : split(v.text)) {
      const size_t eq = item.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
        bad_value("media", v, "'" + item + "' is not NAME=DIR");
      }
      MediumSpec m{item.substr(0, eq), item.substr(eq + 1)};
      if (!std::all_of(m.name.begin(), m.name.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
          })) {
        bad_value("media", v, "name '" + m.name + "' may hold only letters, digits, - and _");
      }
      if (!seen.insert(m.name).second) bad_value("media", v, "name '" + m.name + "' appears twice");
      job.media.push_back(std::move(m));
    }
    if (job.media.empty()) bad_value("media", v, "no medium given");
  }
  {
    const Value& v = get("threads");
    for (const auto& item : split(v.text)) {
      uint64_t n = 0;
      if (auto e = parse_count(item, &n); !e.empty()) bad_value("threads", v, e);
      if (n > 4096) bad_value("threads", v, "at most 4096 threads per point");
      job.threads.push_back(static_cast<uint32_t>(n));
    }
    if (job.threads.empty()) bad_value("threads", v, "no thread count given");
  }
  {
    const Value& v = get("backend");
    for (const auto& item : split(v.text)) {
      if (item == "all") {
        for (const char* b : {"msync", "msync-pool", "uring", "aio", "pwrite"})
          job.backends.push_back(b);
        continue;
      }
      synclog::Config c;
      if (auto r = c.set("backend", item); !r)
        bad_value("backend", v, r.error().message + " or all");
      job.backends.push_back(item);
    }
    if (job.backends.empty()) bad_value("backend", v, "no backend given");
  }
  {
    const Value& v = get("segment-kind");
    for (const auto& item : split(v.text)) {
      synclog::Config c;
      if (item != "auto") {
        if (auto r = c.set("segment_kind", item); !r) {
          bad_value("segment-kind", v, r.error().message + " or auto");
        }
      }
      job.segment_kinds.push_back(item);
    }
    if (job.segment_kinds.empty()) bad_value("segment-kind", v, "no segment kind given");
  }
  job.modes = as_config_list("mode", get("mode"), "mode");
  if (job.modes.empty()) bad_value("mode", get("mode"), "no mode given");
  {
    const Value& v = get("size");
    for (const auto& item : split(v.text)) {
      SizeSpec s;
      const size_t dash = item.find('-');
      std::string e = parse_bytes(item.substr(0, dash), &s.min);
      s.max = s.min;
      if (e.empty() && dash != std::string::npos) e = parse_bytes(item.substr(dash + 1), &s.max);
      if (!e.empty()) bad_value("size", v, e + " or range (100-4000)");
      if (s.min < 32)
        bad_value(
            "size", v,
            "'" + item +
                "': records are at least 32 bytes (they carry thread, seq, length and a check)");
      if (s.max < s.min) bad_value("size", v, "'" + item + "': the range is empty");
      job.sizes.push_back(s);
    }
    if (job.sizes.empty()) bad_value("size", v, "no record size given");
  }
  job.segment_sizes = as_config_list("segment-size", get("segment-size"), "segment_size");
  job.sync_threads = as_config_list("sync-threads", get("sync-threads"), "sync_threads");
  job.queue_depths = as_config_list("queue-depth", get("queue-depth"), "queue_depth");
  job.syncs_in_flight =
      as_config_list("syncs-in-flight", get("syncs-in-flight"), "syncs_in_flight");
  for (const auto& item : as_config_list("metrics", get("metrics"), "metrics")) {
    synclog::Config c;
    (void)c.set("metrics", item);  // checked above
    job.metrics.push_back(c.metrics ? "true" : "false");
  }
  {
    const Value& v = get("inflight");
    for (const auto& item : split(v.text)) {
      uint64_t n = 0;
      if (item != "0") {
        if (auto e = parse_count(item, &n); !e.empty()) bad_value("inflight", v, e + " (or 0)");
      }
      if (n > 65536) bad_value("inflight", v, "at most 65536 appends in flight per writer");
      job.inflight.push_back(static_cast<uint32_t>(n));
    }
    if (job.inflight.empty()) bad_value("inflight", v, "no in-flight depth given");
  }
  {
    const Value& v = get("batch");
    for (const auto& item : split(v.text)) {
      uint64_t n = 0;
      if (auto e = parse_count(item, &n); !e.empty()) bad_value("batch", v, e);
      if (n > 65536) bad_value("batch", v, "at most 65536 records per batch");
      job.batch.push_back(static_cast<uint32_t>(n));
    }
    if (job.batch.empty()) bad_value("batch", v, "no batch size given");
  }
  {
    const Value& v = get("payload");
    for (const auto& item : split(v.text)) {
      if (!parse_payload(item))
        bad_value("payload", v, "'" + item + "' is not one of random | text");
      job.payloads.push_back(item);
    }
    if (job.payloads.empty()) bad_value("payload", v, "no payload given");
  }
  // Checked against the library only when the sweep is planned: a library
  // without the key makes a skip row there, not a failed parse.
  for (auto [key, out] :
       {std::pair{"compression", &job.compressions}, std::pair{"encryption", &job.encryptions}}) {
    const Value& v = get(key);
    *out = split(v.text);
    if (out->empty()) bad_value(key, v, "no value given (none for no " + std::string(key) + ")");
  }
  {
    const Value& v = get("config");
    job.config = v.text;
    if (auto c = synclog::Config::parse(v.text); !c) bad_value("config", v, c.error().message);
  }
  {
    const Value& v = get("duration");
    if (v.text != "auto") job.duration_s = as_seconds("duration", v, false);
  }
  {
    const Value& v = get("ops");
    if (v.text != "0" && !v.text.empty()) {
      if (auto e = parse_count(v.text, &job.ops); !e.empty()) bad_value("ops", v, e + " (or 0)");
    }
  }
  job.warmup_s = as_seconds("warmup", get("warmup"), true);
  {
    const Value& v = get("max-bytes");
    if (auto e = parse_bytes(v.text, &job.max_bytes); !e.empty()) bad_value("max-bytes", v, e);
  }
  {
    const Value& v = get("retain");
    uint64_t n = 0;
    if (v.text != "0") {
      if (auto e = parse_count(v.text, &n); !e.empty()) bad_value("retain", v, e + " (or 0)");
    }
    if (n > 1000000) bad_value("retain", v, "at most 1000000 segments");
    job.retain = static_cast<uint32_t>(n);
  }
  return job;
}

RunOptions make_run(const Values& values) {
  RunOptions run;
  auto get = [&](const char* key) -> const Value& { return values.at(key); };
  run.out = get("out").text;
  run.json = as_bool("json", get("json"));
  run.csv = as_bool("csv", get("csv"));
  if (run.json && run.csv)
    fail("--json and --csv both ask for stdout: pick one (--out writes both files)");
  run.plot = as_choice("plot", get("plot"), {"auto", "on", "off"});
  run.fio = as_choice("fio", get("fio"), {"auto", "on", "off"});
  run.fio_profiles = get("fio-profiles").text;
  if (run.fio_profiles == SYNCLOG_FIO_PROFILES) run.fio_profiles = default_fio_profiles();
  run.fio_runtime_s = as_seconds("fio-runtime", get("fio-runtime"), false);
  run.fio_media = split(get("fio-media").text);
  run.rocksdb = as_choice("rocksdb", get("rocksdb"), {"auto", "on", "off"});
  run.rocksdb_runtime_s = as_seconds("rocksdb-runtime", get("rocksdb-runtime"), false);
  run.budget_s = as_seconds("budget", get("budget"), false);
  run.keep = as_bool("keep", get("keep"));
  run.list = as_bool("list", get("list"));
  run.quiet = as_bool("quiet", get("quiet"));
  if (run.plot == "on" && run.out.empty()) fail("--plot on needs --out DIR for the PNG files");
  return run;
}

}  // namespace

std::string SizeSpec::label() const {
  return min == max ? format_bytes(min) : format_bytes(min) + "-" + format_bytes(max);
}

std::optional<Options> parse_options(int argc, char** argv, int* exit_code) {
  CLI::App app(
      "synclog-bench: a fio-like sweep of the synclog commit log over threads, media, backends, "
      "segment kinds and sync modes. Every point is replayed and verified after it runs.",
      "synclog-bench");
  app.footer(kFooter);
  app.get_formatter()->column_width(34);

  std::map<std::string, std::string> text;
  std::map<std::string, bool> flags;
  std::map<std::string, CLI::Option*> opts;
  std::string job_file;
  app.add_option("jobfile", job_file, "Optional INI job file (see below)")
      ->check(CLI::ExistingFile);
  for (const auto& k : kKeys) {
    const std::string flag = "--" + std::string(k.name);
    if (k.flag) {
      opts[k.name] = app.add_flag(flag, flags[k.name], k.help);
    } else {
      std::string help = k.help;
      if (*k.def) help += " [default: " + std::string(k.def) + "]";
      CLI::Option* o = app.add_option(flag, text[k.name], help)->type_name(k.type);
      o->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
      opts[k.name] = o;
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message; its exit codes vary by error, ours is 2.
    *exit_code = app.exit(e) == 0 ? 0 : 2;
    return std::nullopt;
  }

  try {
    Values defaults;
    for (const auto& k : kKeys) defaults[k.name] = Value{k.flag ? "false" : k.def, "default"};
    Values cli;
    for (const auto& k : kKeys) {
      if (opts[k.name]->count() == 0) continue;
      cli[k.name] = Value{k.flag ? "true" : text[k.name], "--" + std::string(k.name)};
    }
    std::vector<Section> sections;
    if (!job_file.empty()) sections = read_job_file(job_file);

    auto layer = [](Values base, const Values& over, std::optional<Scope> only = std::nullopt) {
      for (const auto& [key, v] : over) {
        if (!only || find_key(key)->scope == *only) base[key] = v;
      }
      return base;
    };
    Values global = sections.empty() ? Values{} : sections.front().values;

    Options options;
    options.run = make_run(layer(layer(defaults, global), cli));
    options.run.job_file = job_file;
    if (sections.size() <= 1) {
      options.jobs.push_back(make_job("default", layer(layer(defaults, global), cli)));
    } else {
      for (size_t i = 1; i < sections.size(); ++i) {
        const Values v = layer(layer(layer(defaults, global, Scope::job), sections[i].values), cli);
        options.jobs.push_back(make_job(sections[i].name, v));
      }
    }
    return options;
  } catch (const Failure& f) {
    std::cerr << "synclog-bench: error: " << f.message << "\nRun with --help for every flag.\n";
    *exit_code = 2;
    return std::nullopt;
  }
}

}  // namespace bench
