// `verify`: recovery's dry run; says what Log::open would about the
// directory, and exits 1 on damage.
#include <cinttypes>
#include <cstdio>

#include "dump.h"
#include "json_out.h"
#include "segments/recovery.h"

namespace synclog::dump {

namespace {

int verify_json(const Common& c) {
  json out = {{"dir", c.dir.string()}, {"mode", mode_name(c.mode)}};
  auto rec = recover_for(c, c.mode);
  if (!rec) {
    const auto& e = rec.error();
    out["ok"] = false;
    out["error"] = e.describe();
    if (e.code == Errc::io_error) {
      emit(out);
      return kUsage;
    }
    // The strict mode stops at the first problem; a skip-damaged pass names
    // every damaged region with its size.
    if (e.code == Errc::corruption) {
      if (auto all = recover_for(c, RecoveryMode::skip_damaged)) {
        out["damage"] = to_json(all->report.damage);
        out["torn_tail"] = torn_tail_json(all->report);
      }
    }
    emit(out);
    return kDamaged;
  }
  const auto& r = rec->report;
  out["ok"] = r.damage.empty();
  out["log_id"] = hex64(rec->log_id);
  out["segments"] = r.segments;
  out["records"] = r.records;
  out["end"] = to_json(r.end);
  out["torn_tail"] = torn_tail_json(r);
  out["temp_files"] = rec->temp_files;
  out["accepted"] = to_json(r.accepted);
  out["damage"] = to_json(r.damage);
  emit(out);
  return r.damage.empty() ? kHealthy : kDamaged;
}

}  // namespace

int cmd_verify(const Common& c) {
  if (c.json) return verify_json(c);
  std::printf("verifying %s (recovery=%s, read-only)\n", c.dir.c_str(), to_string(c.mode));
  auto rec = recover_for(c, c.mode);
  if (!rec) {
    const auto& e = rec.error();
    if (e.code == Errc::io_error) return fail_recovery(e);
    std::printf("error: %s\n", e.describe().c_str());
    if (e.code == Errc::corruption) {
      if (auto all = recover_for(c, RecoveryMode::skip_damaged)) {
        std::printf("every damaged region (skip-damaged scan):\n");
        print_regions("damage", all->report.damage);
        if (all->report.torn_tail) {
          std::printf("torn tail: %" PRIu64 " bytes at %s\n", all->report.torn_bytes,
                      all->report.end.to_string().c_str());
        }
      }
    }
    std::printf("DAMAGED\n");
    return kDamaged;
  }
  const auto& r = rec->report;
  std::printf("log id %s, %u segment file(s), %" PRIu64 " records, replay ends at %s\n",
              hex64(rec->log_id).c_str(), r.segments, r.records, r.end.to_string().c_str());
  if (r.torn_tail) {
    std::printf("torn tail: %" PRIu64
                " bytes at %s dropped (an unfinished write after the last "
                "complete sync: never acknowledged)\n",
                r.torn_bytes, r.end.to_string().c_str());
  }
  if (!rec->temp_files.empty()) {
    std::printf("%zu temp file(s) (Log::open deletes them)\n", rec->temp_files.size());
  }
  print_regions("accepted loss", r.accepted);
  print_regions("damage", r.damage);
  if (!r.damage.empty()) {
    std::printf("DAMAGED: %zu region(s)\n", r.damage.size());
    return kDamaged;
  }
  std::printf("OK\n");
  return kHealthy;
}

}  // namespace synclog::dump
