// `list`: one row per segment file, what a walk of the file alone finds and
// what recovery makes of it.
#include <cinttypes>
#include <cstdio>
#include <map>
#include <set>

#include "dir_scan.h"
#include "dump.h"
#include "json_out.h"
#include "segments/recovery.h"

namespace synclog::dump {

namespace {

// What recovery makes of one segment file.
struct Fate {
  std::optional<Position> durable_end;
  const char* text = "-";  // when there is no durable_end
  const char* json = nullptr;
};

}  // namespace

int cmd_list(const Common& c) {
  auto d = scan_dir(c.dir, c.keys.get());
  if (!d) return fail_recovery(d.error());
  auto rec = recover_for(c, c.mode);

  // Per segment, from recovery: where replay's last extent in it ends, and
  // which regions it reported as damaged.
  std::map<uint64_t, uint32_t> replay_end;
  std::set<uint64_t> damaged, discard;
  if (rec) {
    for (const auto& e : rec->extents) {
      auto& v = replay_end[e.segment];
      v = std::max(v, e.end);
    }
    for (const auto& dmg : rec->report.damage) damaged.insert(dmg.at.segment());
    discard.insert(rec->discard.begin(), rec->discard.end());
  } else if (rec.error().code == Errc::corruption) {
    // The mode refused the damage; a skip-damaged pass finds where it is.
    if (auto all = recover_for(c, RecoveryMode::skip_damaged)) {
      for (const auto& dmg : all->report.damage) damaged.insert(dmg.at.segment());
    }
  }
  auto fate = [&](uint64_t id) {
    Fate f;
    if (auto it = replay_end.find(id); it != replay_end.end()) {
      if (it->second == UINT32_MAX) {
        f.text = f.json = "open";
      } else {
        f.durable_end = Position(id, it->second);
        f.json = "replayed";
      }
    } else if (discard.count(id)) {
      f.text = "(past the end: Log::open deletes it)";
      f.json = "deleted at open";
    } else if (rec) {
      f.text = "(not replayed)";
      f.json = "not replayed";
    }
    return f;
  };
  auto end_of = [&](const FileScan& f) {
    return damaged.count(f.id) && f.end != EndKind::bad_header ? "damaged" : end_name(f.end);
  };
  auto at = [](const FileScan& f, std::optional<uint32_t> o) {
    return o ? std::optional(Position(f.id, *o)) : std::nullopt;
  };

  if (c.json) {
    json segments = json::array();
    for (const auto& f : d->segments) {
      const Fate fa = fate(f.id);
      json s = {{"name", f.name},
                {"id", f.id},
                {"file_size", f.file_size},
                {"log_id", f.header ? json(hex64(f.header->log_id)) : json(nullptr)},
                {"records", f.records},
                {"first_data", to_json(at(f, f.first_data))},
                {"last_data", to_json(at(f, f.last_data))},
                {"end", end_of(f)},
                {"durable_end", to_json(fa.durable_end)},
                {"replay", fa.json ? json(fa.json) : json(nullptr)}};
      if (f.end == EndKind::bad_header) s["header_error"] = f.header_error;
      if (f.end == EndKind::torn) {
        s["walk_stopped_at"] = to_json(Position(f.id, f.stop));
        s["why"] = f.why;
      }
      segments.push_back(std::move(s));
    }
    json out = {{"dir", c.dir.string()},           {"mode", mode_name(c.mode)},
                {"segments", std::move(segments)}, {"temp_files", d->temp_files},
                {"foreign_files", d->foreign},     {"lock_file", d->lock}};
    json r;
    if (rec) {
      r = {{"ok", rec->report.damage.empty()},          {"records", rec->report.records},
           {"end", to_json(rec->report.end)},           {"torn_tail", torn_tail_json(rec->report)},
           {"accepted", to_json(rec->report.accepted)}, {"damage", to_json(rec->report.damage)}};
    } else {
      r = {{"ok", false}, {"error", rec.error().describe()}};
    }
    out["recovery"] = std::move(r);
    emit(out);
    if (!rec) return fail_recovery(rec.error());
    return rec->report.damage.empty() ? kHealthy : kDamaged;
  }

  std::printf("%-24s %11s %-16s %8s %-14s %-14s %-11s %s\n", "segment", "file size", "log id",
              "records", "first data", "last data", "end", "durable end");
  for (const auto& f : d->segments) {
    auto text = [&](std::optional<uint32_t> o) {
      return o ? Position(f.id, *o).to_string() : std::string("-");
    };
    const Fate fa = fate(f.id);
    const std::string durable = fa.durable_end ? fa.durable_end->to_string() : fa.text;
    std::printf("%-24s %11" PRIu64 " %-16s %8" PRIu64 " %-14s %-14s %-11s %s\n", f.name.c_str(),
                f.file_size, f.header ? hex64(f.header->log_id).c_str() : "-", f.records,
                text(f.first_data).c_str(), text(f.last_data).c_str(), end_of(f), durable.c_str());
    if (f.end == EndKind::bad_header) std::printf("    bad header: %s\n", f.header_error.c_str());
    if (f.end == EndKind::torn) {
      std::printf("    walk stopped at %s: %s\n", Position(f.id, f.stop).to_string().c_str(),
                  f.why.c_str());
    }
  }
  for (const auto& t : d->temp_files) {
    std::printf(
        "%-24s (temp file: a spare being made or a segment being recycled; "
        "Log::open deletes it)\n",
        t.c_str());
  }
  std::printf("\n%zu segment file(s), %zu temp file(s)%s\n", d->segments.size(),
              d->temp_files.size(), d->lock ? ", LOCK" : "");
  if (!rec) return fail_recovery(rec.error());
  const auto& r = rec->report;
  std::printf("recovery (%s): %" PRIu64 " records, replay ends at %s", to_string(c.mode), r.records,
              r.end.to_string().c_str());
  if (r.torn_tail) std::printf(", torn tail of %" PRIu64 " bytes dropped", r.torn_bytes);
  std::printf("\n");
  print_regions("accepted loss", r.accepted);
  print_regions("damage", r.damage);
  return r.damage.empty() ? kHealthy : kDamaged;
}

}  // namespace synclog::dump
