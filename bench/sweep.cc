#include "sweep.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include "synclog/log.h"
#include "units.h"

namespace bench {
namespace {

// The segment kind each backend syncs (docs/backends.md's backend table).
std::string own_kind(const std::string& backend) {
  if (backend == "msync" || backend == "msync-pool") return "mmap";
  if (backend == "uring" || backend == "aio") return "direct";
  if (backend == "pwrite") return "buffered";
  return "";  // auto: Config's default kind
}

bool fits(const std::string& backend, const std::string& kind) {
  const std::string own = own_kind(backend);
  return own.empty() || own == kind;
}

// The Config-key axes (--segment-size, --sync-threads, --queue-depth,
// --metrics) crossed: one ",key=value,..." suffix per combination, the last
// axis varying fastest. An unset axis leaves its key at Config's default.
std::vector<std::string> key_axes(const JobOptions& job) {
  std::vector<std::string> out{""};
  auto cross = [&](const char* key, const std::vector<std::string>& values) {
    if (values.empty()) return;
    std::vector<std::string> next;
    for (const auto& prefix : out) {
      for (const auto& v : values) next.push_back(prefix + "," + key + "=" + v);
    }
    out = std::move(next);
  };
  cross("segment_size", job.segment_sizes);
  cross("sync_threads", job.sync_threads);
  cross("queue_depth", job.queue_depths);
  cross("syncs_in_flight", job.syncs_in_flight);
  cross("metrics", job.metrics);
  return out;
}

}  // namespace

std::string Point::label() const {
  std::string s = medium->name + " " + backend + "/" + segment_kind + " " + mode + " " +
                  size.label() + " x" + std::to_string(threads);
  if (inflight > 0) s += " qd" + std::to_string(inflight);
  if (batch > 1) s += " b" + std::to_string(batch);
  if (payload != Payload::random) s += std::string(" ") + to_string(payload);
  if (compression != "none") s += " " + compression;
  if (encryption != "none") s += " " + encryption;
  return s;
}

synclog::Result<void> apply_transforms(const Point& p, synclog::Config& config,
                                       const std::filesystem::path& key_file) {
  for (auto [key, value] :
       {std::pair{"compression", &p.compression}, std::pair{"encryption", &p.encryption}}) {
    if (*value == "none") continue;
    if (auto r = config.set(key, *value); !r) {
      return synclog::make_error(
          r.error().code, std::string(key) + "=" + *value +
                              " is not accepted by this synclog build: " + r.error().message);
    }
  }
  if (p.encryption != "none") {
    if (auto r = config.set("encryption_key_file", key_file.string()); !r) {
      return synclog::make_error(
          r.error().code, "encryption_key_file=" + key_file.string() + ": " + r.error().message);
    }
  }
  return {};
}

void write_key_file(const std::filesystem::path& path) {
  auto fail = [&](const std::string& what) {
    throw std::runtime_error("encryption key file " + path.string() + ": " + what);
  };
  std::ifstream random("/dev/urandom", std::ios::binary);
  unsigned char key[32];
  if (!random.read(reinterpret_cast<char*>(key), sizeof key)) fail("cannot read /dev/urandom");
  char hex[2 * sizeof key + 1];
  for (size_t i = 0; i < sizeof key; ++i) std::snprintf(hex + 2 * i, 3, "%02x", key[i]);
  // Created empty and narrowed to 0600 before the key goes in, so the key
  // is never readable by others, whatever the umask.
  if (!std::ofstream(path, std::ios::trunc)) fail("cannot create it");
  std::error_code ec;
  std::filesystem::permissions(
      path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
      std::filesystem::perm_options::replace, ec);
  if (ec) fail("cannot set mode 0600: " + ec.message());
  std::ofstream out(path, std::ios::trunc);
  out << "1 " << hex << "\n";
  out.flush();
  if (!out) fail("cannot write it");
}

Plan make_plan(const Options& options, bool dry) {
  Plan plan;
  std::map<std::string, const MediumInfo*> by_name;
  std::set<std::string> rejected_seen;  // one skip per job, medium and rejected value
  for (const auto& job : options.jobs) {
    for (const auto& m : job.media) {
      auto it = by_name.find(m.name);
      if (it != by_name.end()) {
        if (std::filesystem::absolute(it->second->dir) != std::filesystem::absolute(m.dir)) {
          throw std::runtime_error("medium '" + m.name + "' names two directories: " +
                                   it->second->dir.string() + " and " + m.dir.string());
        }
        continue;
      }
      std::error_code ec;
      if (!dry) std::filesystem::create_directories(m.dir, ec);
      if (ec) {
        throw std::runtime_error("medium '" + m.name + "': cannot create " + m.dir.string() + ": " +
                                 ec.message());
      }
      // A dry run inspects the nearest existing parent instead.
      auto probe = std::filesystem::absolute(m.dir);
      while (dry && !std::filesystem::exists(probe, ec) && probe.has_parent_path() &&
             probe != probe.parent_path()) {
        probe = probe.parent_path();
      }
      plan.media.push_back(detect_medium(m.name, probe));
      plan.media.back().dir = m.dir;
      by_name[m.name] = &plan.media.back();
    }
  }

  for (const auto& job : options.jobs) {
    for (const auto& ms : job.media) {
      const MediumInfo* medium = by_name.at(ms.name);
      for (const auto& backend : job.backends) {
        for (const auto& kind_option : job.segment_kinds) {
          std::string kind = kind_option == "auto" ? own_kind(backend) : kind_option;
          if (!fits(backend, kind)) {
            plan.notes.push_back("job " + job.name + ": left out backend " + backend +
                                 " with segment kind " + kind + " (" + backend + " syncs " +
                                 own_kind(backend) + " segments)");
            continue;
          }
          for (const auto& mode : job.modes) {
            for (const auto& size : job.sizes) {
              for (const auto& keys : key_axes(job)) {
                std::string axes = "backend=" + backend;
                if (!kind.empty()) axes += ",segment_kind=" + kind;
                axes += ",mode=" + mode + keys;
                auto config = synclog::Config::parse(job.config + "," + axes);
                if (!config)
                  throw std::runtime_error("job " + job.name + ": " + config.error().message);
                config->dir = medium->dir;
                if (auto r = config->validate(); !r) {
                  throw std::runtime_error("job " + job.name + ", " + axes + ": " +
                                           r.error().message);
                }
                if (size.max > config->max_record_size()) {
                  throw std::runtime_error(
                      "job " + job.name + ": --size " + size.label() +
                      " exceeds the largest record (" + std::to_string(config->max_record_size()) +
                      " bytes, half of segment_size " + std::to_string(config->segment_size) + ")");
                }
                for (uint32_t batch : job.batch) {
                  // log.h: a batch is encoded in 8 bytes, plus 8 per record and each
                  // record padded to 8, and must fit in one record's room.
                  const uint64_t encoded = 8 + batch * (8 + (size.max + 7) / 8 * 8);
                  if (batch > 1 && encoded > config->max_record_size()) {
                    throw std::runtime_error("job " + job.name + ": --batch " +
                                             std::to_string(batch) + " of --size " + size.label() +
                                             " records takes up to " + std::to_string(encoded) +
                                             " bytes, more than the largest record (" +
                                             std::to_string(config->max_record_size()) + " bytes)");
                  }
                }
                for (const auto& compression : job.compressions) {
                  for (const auto& encryption : job.encryptions) {
                    // Checked on a copy: the key file is set when the point runs.
                    synclog::Config full = *config;
                    std::string rejected;
                    for (auto [key, value] : {std::pair{"compression", &compression},
                                              std::pair{"encryption", &encryption}}) {
                      if (*value == "none" || !rejected.empty()) continue;
                      if (auto r = full.set(key, *value); !r) {
                        rejected = std::string(key) + "=" + *value +
                                   " is not accepted by this synclog build: " + r.error().message;
                      }
                    }
                    if (!rejected.empty()) {
                      if (rejected_seen.insert(job.name + "|" + ms.name + "|" + rejected).second) {
                        plan.skips.push_back(Skip{job.name, medium, "*", "*", rejected});
                      }
                      continue;
                    }
                    for (const auto& payload : job.payloads) {
                      for (uint32_t threads : job.threads) {
                        for (uint32_t inflight : job.inflight) {
                          for (uint32_t batch : job.batch) {
                            Point p;
                            p.job = job.name;
                            p.medium = medium;
                            p.backend = backend;
                            p.segment_kind = synclog::to_string(config->segment_kind);
                            p.mode = mode;
                            p.threads = threads;
                            p.size = size;
                            p.config = *config;
                            p.config_text = full.to_string();
                            p.payload = *parse_payload(payload);
                            p.compression = compression;
                            p.encryption = encryption;
                            p.axes = axes;
                            p.duration_s = job.duration_s.value_or(0);
                            p.ops = job.ops;
                            p.warmup_s = job.ops > 0 ? 0 : job.warmup_s;
                            p.max_bytes = job.max_bytes;
                            p.retain = job.retain;
                            p.inflight = inflight;
                            p.batch = batch;
                            plan.points.push_back(std::move(p));
                          }
                        }
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  plan.planned = plan.points.size();
  // Every point skipped for a rejected compression or encryption value:
  // the skip rows say why, so the sweep still runs (and shows them).
  if (plan.points.empty() && plan.skips.empty()) {
    std::string why;
    for (const auto& n : plan.notes) why += "\n  " + n;
    throw std::runtime_error("nothing to run: no backend can sync the segment kinds asked for" +
                             why);
  }
  return plan;
}

void probe_backends(Plan& plan, const std::string& work_name) {
  struct Probe {
    bool ok = true;
    std::string message;
  };
  std::map<std::tuple<const MediumInfo*, std::string, std::string>, Probe> probes;
  std::vector<Point> kept;
  for (auto& p : plan.points) {
    const auto key = std::make_tuple(p.medium, p.backend, p.segment_kind);
    auto it = probes.find(key);
    if (it == probes.end()) {
      const auto dir = p.medium->dir / work_name / ("probe-" + p.backend + "-" + p.segment_kind);
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      std::filesystem::create_directories(dir, ec);
      if (ec) throw std::runtime_error("cannot create " + dir.string() + ": " + ec.message());
      synclog::Config c = p.config;
      c.dir = dir;
      Probe probe;
      if (auto log = synclog::Log::open(c); !log) {
        if (log.error().code != synclog::Errc::unsupported) {
          throw std::runtime_error("opening a log in " + dir.string() + " (" + p.label() +
                                   ") failed: " + log.error().describe());
        }
        probe.ok = false;
        probe.message = log.error().message;
        plan.skips.push_back(Skip{p.job, p.medium, p.backend, p.segment_kind, probe.message});
      } else if (auto r = (*log)->close(); !r) {
        throw std::runtime_error("closing a probe log in " + dir.string() +
                                 " failed: " + r.error().describe());
      }
      std::filesystem::remove_all(dir, ec);
      it = probes.emplace(key, probe).first;
    }
    if (it->second.ok) kept.push_back(std::move(p));
  }
  plan.points = std::move(kept);
  for (size_t i = 0; i < plan.points.size(); ++i) plan.points[i].index = i + 1;
}

void assign_durations(Plan& plan, const Options& options, double other_s) {
  // The budget is wall time: each point also spends its warmup and about
  // kPointOverhead opening, closing, reopening and replaying its log.
  constexpr double kOverhead = kPointOverhead;
  double budget = options.run.budget_s - other_s;
  size_t n = 0;
  for (const auto& p : plan.points) {
    if (p.duration_s == 0 && p.ops == 0) {
      ++n;
      budget -= p.warmup_s + kOverhead;
    } else {
      budget -= p.duration_s + p.warmup_s + kOverhead;
    }
  }
  if (n == 0) return;
  const double each = std::clamp(budget / static_cast<double>(n), options.run.min_duration_s,
                                 options.run.max_duration_s);
  for (auto& p : plan.points) {
    if (p.duration_s == 0 && p.ops == 0) p.duration_s = std::round(each * 100) / 100;
  }
}

}  // namespace bench
