#include "verify.h"

#include <algorithm>
#include <chrono>

#include "record.h"
#include "synclog/log.h"

namespace bench {

Verification verify_log(const synclog::Config& config, const Measurement& m, uint64_t max_size,
                        Payload payload) {
  const auto start = std::chrono::steady_clock::now();
  Verification v;
  auto done = [&](std::string message) {
    v.ok = message.empty();
    v.message = std::move(message);
    v.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return v;
  };

  // The reopened log only reads: zero-filling its fresh spare segment would
  // only cost time. Recovery does not depend on the key.
  synclog::Config reopen = config;
  reopen.prezero = false;
  auto opened = synclog::Log::open(reopen);
  v.open_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!opened) return done("reopening the log failed: " + opened.error().describe());
  synclog::Log& log = **opened;
  const auto& report = log.recovery();
  if (!report.damage.empty()) {
    const auto& d = report.damage.front();
    return done("recovery found damage after a clean close: " + std::to_string(d.bytes) +
                " bytes at " + d.at.to_string() + " (" + d.reason + ")");
  }
  if (report.torn_tail) {
    return done("recovery found a torn tail of " + std::to_string(report.torn_bytes) +
                " bytes after a clean close");
  }

  const size_t threads = m.appended.size();
  std::vector<std::vector<std::byte>> patterns;
  for (size_t t = 0; t < threads; ++t)
    patterns.push_back(make_pattern(static_cast<uint32_t>(t), max_size, payload));
  std::vector<uint64_t> next(threads, 0);
  std::vector<uint64_t> first(threads, 0);  // the first seq replay must return per thread
  bool started = false;
  // Sets `first` from F, the segment where replay begins; "" if consistent.
  auto begin_at = [&](uint64_t f) -> std::string {
    std::vector<uint64_t> before;  // data-bearing segments before F
    for (size_t t = 0; t < threads; ++t) {
      first[t] = m.appended[t];
      for (auto [segment, seq] : m.segment_starts.at(t)) {
        if (segment >= f) {
          first[t] = seq;
          break;
        }
        before.push_back(segment);
      }
      next[t] = first[t];
    }
    std::sort(before.begin(), before.end());
    before.erase(std::unique(before.begin(), before.end()), before.end());
    if (before.size() > m.segments_released) {
      return "replay begins in segment " + std::to_string(f) + " but " +
             std::to_string(before.size()) + " segments holding records lie before it and only " +
             std::to_string(m.segments_released) +
             " were released: acknowledged records are missing";
    }
    return {};
  };

  auto reader = log.read();
  if (!reader) return done("Log::read failed: " + reader.error().describe());
  for (;;) {
    auto r = reader->next();
    if (!r) {
      return done("replay stopped after " + std::to_string(v.records) +
                  " records: " + r.error().describe());
    }
    if (!r->has_value()) break;
    const synclog::Record& rec = **r;
    if (!started) {
      started = true;
      if (auto why = begin_at(rec.position.segment()); !why.empty()) return done(why);
    }
    ParsedRecord parsed;
    if (auto why = check_record(rec.data, patterns, &parsed); !why.empty()) {
      return done("record " + std::to_string(v.records) + " at " + rec.position.to_string() +
                  " is damaged: " + why);
    }
    if (parsed.seq != next[parsed.thread]) {
      return done("record at " + rec.position.to_string() + " is thread " +
                  std::to_string(parsed.thread) + " seq " + std::to_string(parsed.seq) +
                  " but seq " + std::to_string(next[parsed.thread]) +
                  " was expected (a hole, a duplicate or reordering)");
    }
    const uint64_t limit = m.appended[parsed.thread] + m.unacked[parsed.thread];
    if (parsed.seq >= limit) {
      return done("record at " + rec.position.to_string() + " is thread " +
                  std::to_string(parsed.thread) + " seq " + std::to_string(parsed.seq) +
                  ", which that thread never appended");
    }
    ++next[parsed.thread];
    ++v.records;
  }
  if (!started) {
    if (auto why = begin_at(UINT64_MAX); !why.empty())
      return done("replay returned no records; " + why);
  }
  for (size_t t = 0; t < threads; ++t) {
    if (next[t] < m.appended[t]) {
      return done("thread " + std::to_string(t) + " had seqs " + std::to_string(first[t]) + ".." +
                  std::to_string(m.appended[t] - 1) +
                  " acknowledged after the released segments, "
                  "but replay returned only up to " +
                  std::to_string(next[t]) + ": acknowledged records are missing");
    }
  }
  if (auto r = log.close(); !r)
    return done("closing the reopened log failed: " + r.error().describe());
  return done("");
}

}  // namespace bench
