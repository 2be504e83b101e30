// `config`: what the segment headers record about the log, and what the
// format leaves unrecorded.
#include <cinttypes>
#include <cstdio>
#include <optional>

#include "dir_scan.h"
#include "dump.h"
#include "json_out.h"

namespace synclog::dump {

namespace {

// A run of segments whose headers agree, printed once.
struct Run {
  uint64_t first = 0, last = 0;
  uint64_t size = 0, log_id = 0;
  uint32_t block = 0, version = 0;
  std::optional<uint32_t> key_id;  // encrypted segments: the master key's id
};

// Config keys (docs/config.md) that no header stores.
constexpr const char* kNotRecorded[] = {
    "backend",        "segment_kind", "mode",        "interval",        "lag_bound", "window",
    "spare_segments", "recycle",      "prezero",     "max_total_size",  "recovery",  "sync_threads",
    "queue_depth",    "tail",         "direct_sync", "syncs_in_flight", "max_record"};

}  // namespace

int cmd_config(const Common& c) {
  auto d = scan_dir(c.dir, c.keys.get());
  if (!d) return fail_recovery(d.error());
  int rc = d->foreign.empty() ? kHealthy : kDamaged;
  std::vector<Run> runs;
  std::vector<const FileScan*> bad;
  for (const auto& f : d->segments) {
    if (!f.header) {
      bad.push_back(&f);
      rc = kDamaged;
      continue;
    }
    const auto& h = *f.header;
    const std::optional<uint32_t> key_id =
        h.encrypted ? std::optional<uint32_t>(h.key_id) : std::nullopt;
    if (!runs.empty() && runs.back().size == h.segment_size && runs.back().block == h.block_size &&
        runs.back().log_id == h.log_id && runs.back().version == h.version &&
        runs.back().key_id == key_id) {
      runs.back().last = f.id;
    } else {
      runs.push_back(Run{f.id, f.id, h.segment_size, h.log_id, h.block_size, h.version, key_id});
    }
  }

  if (c.json) {
    json j_runs = json::array(), j_bad = json::array();
    for (const auto& r : runs) {
      j_runs.push_back({{"first_segment", r.first},
                        {"last_segment", r.last},
                        {"format_version", r.version},
                        {"segment_size", r.size},
                        {"block_size", r.block},
                        {"log_id", hex64(r.log_id)},
                        {"encryption_key_id", r.key_id ? json(*r.key_id) : json(nullptr)}});
    }
    for (const auto* f : bad) j_bad.push_back({{"name", f->name}, {"error", f->header_error}});
    emit({{"dir", c.dir.string()},
          {"runs", std::move(j_runs)},
          {"bad_headers", std::move(j_bad)},
          {"foreign_files", d->foreign},
          {"not_recorded", kNotRecorded}});
    return rc;
  }

  if (d->segments.empty()) std::printf("no segment files in %s\n", c.dir.c_str());
  for (const auto* f : bad) {
    std::printf("segment %s: bad header: %s\n", f->name.c_str(), f->header_error.c_str());
  }
  for (const auto& r : runs) {
    std::printf("segments %" PRIu64 "..%" PRIu64 ":\n", r.first, r.last);
    std::printf("  format version  %u\n", r.version);
    std::printf("  segment_size    %" PRIu64 " bytes (%" PRIu64 " KiB)\n", r.size, r.size >> 10);
    std::printf(
        "  block_size      %u (the direct I/O alignment for direct segments; 4096 "
        "otherwise)\n",
        r.block);
    std::printf("  log id          %s\n", hex64(r.log_id).c_str());
    if (r.key_id) {
      std::printf("  encryption      aes-256-gcm under key id %u (records may be encrypted)\n",
                  *r.key_id);
    }
  }
  std::printf(
      "\nThe format does not record the rest of the configuration the log was written with:\n"
      "backend, segment kind, sync mode, interval/window/lag bound, spare segments, recycle,\n"
      "prezero, max_total_size, recovery mode, sync threads, queue depth, tail policy and the\n"
      "direct I/O alignment are not stored on disk. A log opens with any of them (F5).\n"
      "Compression is recorded per record, not per segment (synclog-dump print shows it).\n");
  if (!d->foreign.empty()) {
    std::printf("\nforeign file(s) (Log::open refuses this directory):");
    for (const auto& n : d->foreign) std::printf(" %s", n.c_str());
    std::printf("\n");
  }
  return rc;
}

}  // namespace synclog::dump
