// synclog-bench's options: command-line flags (CLI11) and, like fio, an
// optional INI job file whose [global] section sets defaults and whose other
// sections are jobs run one after another.
//
// Every key is a long flag name without the dashes ("threads", "segment-size";
// '_' and '-' are the same). A value is taken from, last wins: the built-in
// default, [global], the job's own section, the command line. So a flag
// overrides the job file everywhere. Run-wide keys (out, json, fio...) may
// appear on the command line or in [global] only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace bench {

struct MediumSpec {
  std::string name;  // label used in rows and plots ("disk", "ram")
  std::filesystem::path dir;
};

// A record size: fixed (min == max) or drawn uniformly from [min, max].
struct SizeSpec {
  uint64_t min = 0;
  uint64_t max = 0;
  std::string label() const;  // "128B", "4KiB", "100B-4KiB"
  double mean() const { return (static_cast<double>(min) + static_cast<double>(max)) / 2; }
};

// One job: axes whose cross product is swept, and how each point runs.
struct JobOptions {
  std::string name = "default";
  std::vector<MediumSpec> media;
  std::vector<uint32_t> threads;
  std::vector<std::string> backends;       // Config names: msync, msync-pool, uring, aio, pwrite
  std::vector<std::string> segment_kinds;  // "auto": the backend's own kind
  std::vector<std::string> modes;          // periodic, batch, group
  std::vector<SizeSpec> sizes;
  std::vector<std::string> segment_sizes;    // Config values; empty: Config default
  std::vector<std::string> sync_threads;     // "
  std::vector<std::string> queue_depths;     // "
  std::vector<std::string> syncs_in_flight;  // "": Config's default
  std::vector<std::string> metrics;          // "true", "false"; empty: Config default
  std::vector<uint32_t> inflight;            // append_async calls kept outstanding; 0: blocking
  std::vector<uint32_t> batch;               // records per write batch; 1: single appends
  std::vector<std::string> payloads;         // "random", "text" (record.h)
  // Config compression / encryption values; "none" sets no key, so the
  // bench runs against a library that lacks them.
  std::vector<std::string> compressions;
  std::vector<std::string> encryptions;
  std::string config;                // more Config keys: "interval=5ms,prezero=false"
  std::optional<double> duration_s;  // nullopt: auto (the run's budget spread over points)
  uint64_t ops = 0;                  // > 0: a fixed op count per point instead
  double warmup_s = 0.2;
  uint32_t retain = 2;     // segments kept behind the slowest writer; 0: no release
  uint64_t max_bytes = 0;  // > 0: end a point early after this many payload bytes
};

struct RunOptions {
  std::filesystem::path out;  // results directory; empty: write no files
  bool json = false;          // JSON lines on stdout instead of the table
  bool csv = false;           // CSV on stdout instead of the table
  std::string plot = "auto";  // auto | on | off
  std::string fio = "auto";   // auto | on | off
  std::filesystem::path fio_profiles;
  double fio_runtime_s = 1;
  std::vector<std::string> fio_media;  // medium names; empty: every medium that is not memory
  std::string rocksdb = "auto";        // auto | on | off: db_bench baseline on the fio media
  double rocksdb_runtime_s = 1;
  double budget_s = 180;         // duration=auto: wall seconds for the sweep's points
  double min_duration_s = 0.75;  // duration=auto clamps each point to [min, max]
  double max_duration_s = 4;
  bool keep = false;   // keep each point's log directory
  bool list = false;   // print the planned points and exit
  bool quiet = false;  // no progress on stderr
  std::filesystem::path job_file;
};

struct Options {
  RunOptions run;
  std::vector<JobOptions> jobs;
};

// Parses the command line (and the job file it names). Returns the options,
// or nullopt with *exit_code set: 0 after --help, 2 after an error (already
// printed to stderr, naming the flag or job-file key and the accepted values).
std::optional<Options> parse_options(int argc, char** argv, int* exit_code);

}  // namespace bench
