// `stats`: what the records replay returns are made of, like pg_waldump
// --stats: counts and bytes per kind, data record sizes, per segment
// counts, sessions, sync markers and the damage recovery found.
#include <cinttypes>
#include <cstdio>
#include <map>
#include <vector>

#include "dump.h"
#include "json_out.h"
#include "record_walk.h"
#include "segments/recovery.h"

namespace synclog::dump {

namespace {

struct Tally {
  uint64_t records = 0, payload = 0, framed = 0;
  void add(const seg::RecordView& r) {
    ++records;
    payload += r.payload.size();
    framed += r.framed;
  }
};

struct SegmentTally {
  Tally all;
  uint64_t data = 0;
  Position first, last;
};

struct Session {
  Position at, previous_end;
};

// Payload size -> how many data records have it: exact percentiles in
// memory that grows with the distinct sizes, not with the records.
using Sizes = std::map<uint32_t, uint64_t>;

// The nearest-rank percentile: the smallest size with at least p% of the
// records at or below it.
uint32_t percentile(const Sizes& sizes, uint64_t n, unsigned p) {
  const uint64_t rank = std::max<uint64_t>(1, (n * p + 99) / 100);
  uint64_t seen = 0;
  for (const auto& [size, count] : sizes) {
    seen += count;
    if (seen >= rank) return size;
  }
  return sizes.empty() ? 0 : sizes.rbegin()->first;
}

uint64_t damaged_bytes(const RecoveryReport& r) {
  uint64_t n = 0;
  for (const auto& d : r.damage) n += d.bytes;
  return n;
}

constexpr seg::Kind kKinds[] = {seg::Kind::data,  seg::Kind::sync,   seg::Kind::session,
                                seg::Kind::loss,  seg::Kind::batch,  seg::Kind::end,
                                seg::Kind::first, seg::Kind::middle, seg::Kind::last};

struct Stats {
  std::map<seg::Kind, Tally> kinds;
  Tally total;
  Sizes sizes;
  std::map<uint64_t, SegmentTally> segments;
  std::vector<Session> sessions;
  std::optional<Position> last_durable;  // what the last sync marker names
  std::optional<Position> first, last, next;

  uint64_t data() const {
    auto it = kinds.find(seg::Kind::data);
    return it == kinds.end() ? 0 : it->second.records;
  }
};

json stats_json(const Common& c, const Range& range, const Stats& s, const seg::Recovered& rec) {
  json kinds = json::object();
  for (seg::Kind k : kKinds) {
    const auto it = s.kinds.find(k);
    const Tally t = it == s.kinds.end() ? Tally{} : it->second;
    kinds[kind_name(k)] = {
        {"records", t.records}, {"payload_bytes", t.payload}, {"framed_bytes", t.framed}};
  }
  json sizes = nullptr;
  if (const uint64_t n = s.data()) {
    sizes = {{"min", s.sizes.begin()->first},
             {"median", percentile(s.sizes, n, 50)},
             {"p99", percentile(s.sizes, n, 99)},
             {"max", s.sizes.rbegin()->first}};
  }
  json segments = json::array();
  for (const auto& [id, t] : s.segments) {
    segments.push_back({{"id", id},
                        {"records", t.all.records},
                        {"data", t.data},
                        {"payload_bytes", t.all.payload},
                        {"framed_bytes", t.all.framed},
                        {"first", to_json(t.first)},
                        {"last", to_json(t.last)}});
  }
  json sessions = json::array();
  for (const auto& x : s.sessions) {
    sessions.push_back({{"position", to_json(x.at)}, {"previous_end", to_json(x.previous_end)}});
  }
  const auto& r = rec.report;
  const uint64_t damaged = damaged_bytes(r);
  return {{"dir", c.dir.string()},
          {"mode", mode_name(c.mode)},
          {"from", to_json(range.from)},
          {"to", to_json(range.to)},
          {"limit", range.limit ? json(*range.limit) : json(nullptr)},
          {"first", to_json(s.first)},
          {"last", to_json(s.last)},
          {"next", to_json(s.next)},
          {"records", s.total.records},
          {"payload_bytes", s.total.payload},
          {"framed_bytes", s.total.framed},
          {"kinds", std::move(kinds)},
          {"data_sizes", std::move(sizes)},
          {"segments", std::move(segments)},
          {"sessions", std::move(sessions)},
          {"sync_markers",
           {{"count", s.kinds.count(seg::Kind::sync) ? s.kinds.at(seg::Kind::sync).records : 0},
            {"last_durable", to_json(s.last_durable)}}},
          {"damage",
           {{"regions", to_json(r.damage)},
            {"bytes", damaged},
            {"torn_tail", torn_tail_json(r)},
            {"accepted", to_json(r.accepted)}}}};
}

void print_stats(const Common& c, const Stats& s, const seg::Recovered& rec) {
  std::printf("%s (recovery=%s): %" PRIu64 " records", c.dir.c_str(), mode_name(c.mode).c_str(),
              s.total.records);
  if (s.first) {
    std::printf(" from %s to %s", s.first->to_string().c_str(), s.last->to_string().c_str());
  }
  std::printf("\n\n%-8s %10s %15s %15s %8s\n", "kind", "records", "payload bytes", "framed bytes",
              "framed%");
  auto row = [&](const char* name, const Tally& t) {
    const double share = s.total.framed ? 100.0 * t.framed / s.total.framed : 0.0;
    std::printf("%-8s %10" PRIu64 " %15" PRIu64 " %15" PRIu64 " %7.1f%%\n", name, t.records,
                t.payload, t.framed, share);
  };
  for (seg::Kind k : kKinds) {
    const auto it = s.kinds.find(k);
    row(kind_name(k), it == s.kinds.end() ? Tally{} : it->second);
  }
  row("total", s.total);

  if (const uint64_t n = s.data()) {
    std::printf("\ndata record payload sizes: min %u, median %u, p99 %u, max %u bytes\n",
                s.sizes.begin()->first, percentile(s.sizes, n, 50), percentile(s.sizes, n, 99),
                s.sizes.rbegin()->first);
  }
  std::printf("\n%-8s %10s %10s %15s %-14s %-14s\n", "segment", "records", "data", "framed bytes",
              "first", "last");
  for (const auto& [id, t] : s.segments) {
    std::printf("%-8" PRIu64 " %10" PRIu64 " %10" PRIu64 " %15" PRIu64 " %-14s %-14s\n", id,
                t.all.records, t.data, t.all.framed, t.first.to_string().c_str(),
                t.last.to_string().c_str());
  }
  std::printf("\nsessions: %zu\n", s.sessions.size());
  for (const auto& x : s.sessions) {
    std::printf("  %s (previous session ended at %s)\n", x.at.to_string().c_str(),
                x.previous_end.to_string().c_str());
  }
  const auto sync = s.kinds.find(seg::Kind::sync);
  std::printf("sync markers: %" PRIu64, sync == s.kinds.end() ? 0 : sync->second.records);
  if (s.last_durable) {
    std::printf(" (the last says everything before %s was durable)",
                s.last_durable->to_string().c_str());
  }
  std::printf("\n");
  const auto& r = rec.report;
  const uint64_t damaged = damaged_bytes(r);
  if (r.damage.empty()) {
    std::printf("damage: none\n");
  } else {
    std::printf("damage: %zu region(s), %" PRIu64 " bytes\n", r.damage.size(), damaged);
    print_regions("  damage", r.damage);
  }
  if (r.torn_tail) {
    std::printf("torn tail: %" PRIu64 " bytes at %s dropped\n", r.torn_bytes,
                r.end.to_string().c_str());
  }
  print_regions("accepted loss", r.accepted);
}

}  // namespace

int cmd_stats(const Common& c, const Range& range) {
  auto rec = recover_for(c, c.mode);
  if (!rec) {
    const int rc = fail_recovery(rec.error());
    if (rec.error().code == Errc::corruption) {
      std::fprintf(stderr,
                   "synclog-dump: stats --mode skip-damaged counts around every damaged region\n");
    }
    return rc;
  }
  Stats s;
  auto walked = walk_records(
      c.dir, *rec, range,
      [&](Position at, const seg::RecordView& r) {
        if (range.limit && s.total.records == *range.limit) {
          s.next = at;
          return false;
        }
        s.kinds[r.kind].add(r);
        s.total.add(r);
        auto& seg_tally = s.segments[at.segment()];
        if (seg_tally.all.records == 0) seg_tally.first = at;
        seg_tally.last = at;
        seg_tally.all.add(r);
        if (!s.first) s.first = at;
        s.last = at;
        switch (r.kind) {
          case seg::Kind::data:
            ++seg_tally.data;
            ++s.sizes[static_cast<uint32_t>(r.payload.size())];
            break;
          case seg::Kind::sync:
            s.last_durable = r.position_payload();
            break;
          case seg::Kind::session:
            s.sessions.push_back({at, r.position_payload()});
            break;
          default:
            break;
        }
        return true;
      },
      c.keys.get());
  if (!walked) return fail_recovery(walked.error());
  if (c.json) {
    emit(stats_json(c, range, s, *rec));
  } else {
    print_stats(c, s, *rec);
  }
  if (s.next) note_limit(*range.limit, *s.next);
  return rec->report.damage.empty() ? kHealthy : kDamaged;
}

}  // namespace synclog::dump
