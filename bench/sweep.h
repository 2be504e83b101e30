// Turns the options into the list of points to run: the cross product of
// each job's axes, each a full synclog::Config checked by Config::parse and
// validate() before anything runs. Then probes each (medium, backend,
// segment kind) once with Log::open: a backend that fails with
// Errc::unsupported becomes one "skipped" entry and its points are dropped,
// so the sweep grows by itself as backends land.
#pragma once

#include <deque>
#include <filesystem>
#include <string>
#include <vector>

#include "medium.h"
#include "options.h"
#include "point.h"

namespace bench {

// A backend that cannot run on a medium, or (backend "*") a compression or
// encryption value the library rejects, e.g. one built before it had them.
struct Skip {
  std::string job;
  const MediumInfo* medium = nullptr;
  std::string backend;
  std::string segment_kind;
  std::string message;  // the library's error
};

struct Plan {
  std::deque<MediumInfo> media;  // deque: points keep pointers into it
  std::vector<Point> points;
  std::vector<Skip> skips;
  std::vector<std::string> notes;  // combinations left out, and why
  size_t planned = 0;              // points before probing
};

// Builds the plan; creates the media directories unless `dry` (--list).
// Throws std::runtime_error with a message naming the key on a bad value or
// combination.
Plan make_plan(const Options& options, bool dry = false);

// Sets the point's compression and encryption Config keys that are not
// "none" on `config`; a cipher also gets encryption_key_file = `key_file`.
// The error is the library's, prefixed with the key and value.
[[nodiscard]] synclog::Result<void> apply_transforms(const Point& p, synclog::Config& config,
                                                     const std::filesystem::path& key_file);

// Writes a throwaway encryption key file, mode 0600 before any key byte is
// in it: one line "1 <64 hex digits>" from /dev/urandom. Throws
// std::runtime_error naming the path on failure.
void write_key_file(const std::filesystem::path& path);

// Probes the backends (see above) inside `work` subdirectories of each
// medium. Throws std::runtime_error if a probe fails for another reason
// (an unusable directory...), which would fail every point anyway.
void probe_backends(Plan& plan, const std::string& work_name);

// About how long each point takes beyond its warmup and window: open,
// close, reopen and replay (measured on the reference machine).
inline constexpr double kPointOverhead = 0.45;

// duration=auto: spreads the wall-time budget, less `other_s` seconds spent
// elsewhere (fio), over the points that will run.
void assign_durations(Plan& plan, const Options& options, double other_s);

}  // namespace bench
