// synclog-dump: inspect and verify a synclog log directory without changing it.
//
//   synclog-dump list   DIR [--mode M]     one row per segment file
//   synclog-dump verify DIR [--mode M]     recovery dry run; exit 1 on damage
//   synclog-dump print  DIR [--from SEG:OFF] [--to SEG:OFF] [--hex|--raw] [--all]
//   synclog-dump config DIR                what the segment headers record
//
// Everything here is read-only. Log::open is never called: it would start a
// new segment and delete temp files. The tool runs the same recovery scan
// (seg::recover) and the format decoders that Log::open uses, so "verify"
// answers exactly what Log::open would say about the directory.
//
// Exit status: 0 healthy; 1 damage, a bad segment header, foreign files (the
// log as Log::open would see it is not healthy); 2 usage errors or a directory
// that cannot be read at all.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "segments/format.h"
#include "segments/recovery.h"
#include "segments/segment.h"
#include "synclog/config.h"
#include "synclog/position.h"

namespace fs = std::filesystem;
using synclog::Position;
using synclog::RecoveryMode;
namespace seg = synclog::seg;

namespace {

constexpr int kHealthy = 0;
constexpr int kDamaged = 1;
constexpr int kUsage = 2;

using Bytes = std::vector<std::byte>;

std::optional<Bytes> read_file(const fs::path& path, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot open " + path.string();
    return std::nullopt;
  }
  Bytes buf;
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (!ec) buf.reserve(size);
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    const auto* p = reinterpret_cast<const std::byte*>(chunk);
    buf.insert(buf.end(), p, p + in.gcount());
  }
  if (in.bad()) {
    *error = "read error in " + path.string();
    return std::nullopt;
  }
  return buf;
}

std::string pos(Position p) { return p.to_string(); }

std::string hex64(uint64_t v) {
  char s[24];
  std::snprintf(s, sizeof s, "%016" PRIx64, v);
  return s;
}

const char* kind_name(seg::Kind k) {
  switch (k) {
    case seg::Kind::data:
      return "data";
    case seg::Kind::sync:
      return "sync";
    case seg::Kind::end:
      return "end";
    case seg::Kind::session:
      return "session";
    case seg::Kind::loss:
      return "loss";
    case seg::Kind::none:
      break;
  }
  return "none";
}

bool parse_mode(const std::string& s, RecoveryMode* mode) {
  for (RecoveryMode m : {RecoveryMode::tolerate_torn_tail, RecoveryMode::point_in_time,
                         RecoveryMode::absolute, RecoveryMode::skip_damaged}) {
    std::string name = synclog::to_string(m);
    std::replace(name.begin(), name.end(), '_', '-');
    std::string alt = s;
    std::replace(alt.begin(), alt.end(), '_', '-');
    if (alt == name) {
      *mode = m;
      return true;
    }
  }
  return false;
}

// "SEG:OFF" in decimal.
bool parse_position(const std::string& s, Position* out) {
  const auto colon = s.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) return false;
  try {
    size_t n1 = 0, n2 = 0;
    const std::string a = s.substr(0, colon), b = s.substr(colon + 1);
    const unsigned long long seg_id = std::stoull(a, &n1);
    const unsigned long long off = std::stoull(b, &n2);
    if (n1 != a.size() || n2 != b.size() || seg_id > 0xffffffffull || off > 0xffffffffull) {
      return false;
    }
    *out = Position(seg_id, off);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// A missing or unreadable directory is a usage problem, not damage.
bool check_dir(const fs::path& dir) {
  std::error_code ec;
  const auto st = fs::status(dir, ec);
  if (!fs::exists(st)) {
    std::fprintf(stderr, "synclog-dump: %s: no such directory\n", dir.c_str());
    return false;
  }
  if (!fs::is_directory(st)) {
    std::fprintf(stderr, "synclog-dump: %s: not a directory\n", dir.c_str());
    return false;
  }
  return true;
}

int fail_recovery(const synclog::Error& e) {
  std::fprintf(stderr, "synclog-dump: %s\n", e.describe().c_str());
  return e.code == synclog::Errc::io_error ? kUsage : kDamaged;
}

// ---- One segment file, walked on its own (no cross-segment rules). --------

enum class EndKind { end_record, clean, torn, bad_header };

struct FileScan {
  uint64_t id = 0;
  std::string name;
  uint64_t file_size = 0;
  std::optional<seg::SegmentHeader> header;
  std::string header_error;
  uint64_t records = 0;  // data records
  std::optional<uint32_t> first_data, last_data;
  uint32_t stop = 0;  // offset where the walk from 64 stopped (past the end record if any)
  EndKind end = EndKind::clean;
  std::string why;  // for a torn stop: the decoder's reason
};

bool all_zero(std::span<const std::byte> b) {
  return std::all_of(b.begin(), b.end(), [](std::byte x) { return x == std::byte{0}; });
}

FileScan scan_file(const fs::path& dir, uint64_t id, const std::string& name) {
  FileScan f;
  f.id = id;
  f.name = name;
  std::string err;
  auto buf = read_file(dir / name, &err);
  if (!buf) {
    f.end = EndKind::bad_header;
    f.header_error = err;
    return f;
  }
  f.file_size = buf->size();
  auto header = seg::decode_header(*buf);
  if (!header) {
    f.end = EndKind::bad_header;
    f.header_error = header.error().message;
    return f;
  }
  f.header = *header;
  if (header->segment_id != id) {
    f.end = EndKind::bad_header;
    f.header_error = "header names segment " + std::to_string(header->segment_id);
    return f;
  }
  uint32_t off = seg::kHeaderSize;
  for (;;) {
    const seg::Decoded d = seg::decode_record(*buf, id, off);
    if (d.status == seg::Decode::ok) {
      if (d.record.kind == seg::Kind::end) {
        f.end = EndKind::end_record;
        off += d.record.framed;
        break;
      }
      if (d.record.kind == seg::Kind::data) {
        ++f.records;
        if (!f.first_data) f.first_data = off;
        f.last_data = off;
      }
      off += d.record.framed;
      continue;
    }
    const auto rest = std::span<const std::byte>(*buf).subspan(std::min<size_t>(off, buf->size()));
    if (d.status == seg::Decode::empty && all_zero(rest)) {
      f.end = EndKind::clean;
    } else {
      f.end = EndKind::torn;
      f.why =
          d.status == seg::Decode::empty ? "unwritten slot followed by written bytes" : d.reason;
    }
    break;
  }
  f.stop = off;
  return f;
}

struct Dir {
  std::vector<FileScan> segments;
  std::vector<std::string> temp_files;
  std::vector<std::string> foreign;
  bool lock = false;
};

std::optional<Dir> scan_dir(const fs::path& dir) {
  Dir out;
  std::error_code ec;
  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  if (ec) {
    std::fprintf(stderr, "synclog-dump: %s: %s\n", dir.c_str(), ec.message().c_str());
    return std::nullopt;
  }
  std::sort(names.begin(), names.end());
  std::map<uint64_t, std::string> ids;
  for (const auto& n : names) {
    uint64_t id = 0;
    if (seg::parse_segment_file_name(n, &id)) {
      ids[id] = n;
    } else if (seg::is_temp_file_name(n)) {
      out.temp_files.push_back(n);
    } else if (n == seg::kLockFileName) {
      out.lock = true;
    } else {
      out.foreign.push_back(n);
    }
  }
  for (const auto& [id, n] : ids) out.segments.push_back(scan_file(dir, id, n));
  return out;
}

// ---- list ------------------------------------------------------------------

int cmd_list(const fs::path& dir, RecoveryMode mode) {
  if (!check_dir(dir)) return kUsage;
  auto d = scan_dir(dir);
  if (!d) return kUsage;
  auto rec = seg::recover(dir, mode);

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
  } else if (rec.error().code == synclog::Errc::corruption) {
    // The mode refused the damage; a skip-damaged pass finds where it is.
    if (auto all = seg::recover(dir, RecoveryMode::skip_damaged)) {
      for (const auto& dmg : all->report.damage) damaged.insert(dmg.at.segment());
    }
  }

  std::printf("%-24s %11s %-16s %8s %-14s %-14s %-11s %s\n", "segment", "file size", "log id",
              "records", "first data", "last data", "end", "durable end");
  for (const auto& f : d->segments) {
    auto at = [&](std::optional<uint32_t> o) {
      return o ? pos(Position(f.id, *o)) : std::string("-");
    };
    std::string end;
    switch (f.end) {
      case EndKind::end_record:
        end = "end record";
        break;
      case EndKind::clean:
        end = "clean";
        break;
      case EndKind::torn:
        end = "torn";
        break;
      case EndKind::bad_header:
        end = "bad header";
        break;
    }
    if (damaged.count(f.id) && f.end != EndKind::bad_header) end = "damaged";
    std::string durable = "-";
    if (auto it = replay_end.find(f.id); it != replay_end.end()) {
      durable = it->second == UINT32_MAX ? "open" : pos(Position(f.id, it->second));
    } else if (discard.count(f.id)) {
      durable = "(past the end: Log::open deletes it)";
    } else if (rec) {
      durable = "(not replayed)";
    }
    std::printf("%-24s %11" PRIu64 " %-16s %8" PRIu64 " %-14s %-14s %-11s %s\n", f.name.c_str(),
                f.file_size, f.header ? hex64(f.header->log_id).c_str() : "-", f.records,
                at(f.first_data).c_str(), at(f.last_data).c_str(), end.c_str(), durable.c_str());
    if (f.end == EndKind::bad_header) std::printf("    bad header: %s\n", f.header_error.c_str());
    if (f.end == EndKind::torn) {
      std::printf("    walk stopped at %s: %s\n", pos(Position(f.id, f.stop)).c_str(),
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
  std::printf("recovery (%s): %" PRIu64 " records, replay ends at %s", synclog::to_string(mode),
              r.records, pos(r.end).c_str());
  if (r.torn_tail) std::printf(", torn tail of %" PRIu64 " bytes dropped", r.torn_bytes);
  std::printf("\n");
  for (const auto& dmg : r.accepted) {
    std::printf("accepted loss: segment %" PRIu64 " offset %" PRIu64 ", %" PRIu64 " bytes: %s\n",
                dmg.at.segment(), dmg.at.offset(), dmg.bytes, dmg.reason.c_str());
  }
  for (const auto& dmg : r.damage) {
    std::printf("damage: segment %" PRIu64 " offset %" PRIu64 ", %" PRIu64 " bytes: %s\n",
                dmg.at.segment(), dmg.at.offset(), dmg.bytes, dmg.reason.c_str());
  }
  return r.damage.empty() ? kHealthy : kDamaged;
}

// ---- verify ----------------------------------------------------------------

void print_damage(const std::vector<synclog::Damage>& damage) {
  for (const auto& dmg : damage) {
    std::printf("damage: segment %" PRIu64 " offset %" PRIu64 ", %" PRIu64 " bytes: %s\n",
                dmg.at.segment(), dmg.at.offset(), dmg.bytes, dmg.reason.c_str());
  }
}

// Losses an earlier open accepted, from the log's loss records.
void print_accepted(const std::vector<synclog::Damage>& accepted) {
  for (const auto& dmg : accepted) {
    std::printf("accepted loss: segment %" PRIu64 " offset %" PRIu64 ", %" PRIu64 " bytes: %s\n",
                dmg.at.segment(), dmg.at.offset(), dmg.bytes, dmg.reason.c_str());
  }
}

int cmd_verify(const fs::path& dir, RecoveryMode mode) {
  if (!check_dir(dir)) return kUsage;
  std::printf("verifying %s (recovery=%s, read-only)\n", dir.c_str(), synclog::to_string(mode));
  auto rec = seg::recover(dir, mode);
  if (!rec) {
    const auto& e = rec.error();
    if (e.code == synclog::Errc::io_error) return fail_recovery(e);
    std::printf("error: %s\n", e.describe().c_str());
    if (e.code == synclog::Errc::corruption) {
      // The strict mode stops at the first problem; a skip-damaged pass
      // names every damaged region with its size.
      if (auto all = seg::recover(dir, RecoveryMode::skip_damaged)) {
        std::printf("every damaged region (skip-damaged scan):\n");
        print_damage(all->report.damage);
        if (all->report.torn_tail) {
          std::printf("torn tail: %" PRIu64 " bytes at %s\n", all->report.torn_bytes,
                      pos(all->report.end).c_str());
        }
      }
    }
    std::printf("DAMAGED\n");
    return kDamaged;
  }
  const auto& r = rec->report;
  std::printf("log id %s, %u segment file(s), %" PRIu64 " records, replay ends at %s\n",
              hex64(rec->log_id).c_str(), r.segments, r.records, pos(r.end).c_str());
  if (r.torn_tail) {
    std::printf("torn tail: %" PRIu64
                " bytes at %s dropped (an unfinished write after the last "
                "complete sync: never acknowledged)\n",
                r.torn_bytes, pos(r.end).c_str());
  }
  if (!rec->temp_files.empty()) {
    std::printf("%zu temp file(s) (Log::open deletes them)\n", rec->temp_files.size());
  }
  print_accepted(r.accepted);
  print_damage(r.damage);
  if (!r.damage.empty()) {
    std::printf("DAMAGED: %zu region(s)\n", r.damage.size());
    return kDamaged;
  }
  std::printf("OK\n");
  return kHealthy;
}

// ---- print -----------------------------------------------------------------

void hex_dump(std::span<const std::byte> b) {
  for (size_t row = 0; row < b.size(); row += 16) {
    std::printf("  %08zx: ", row);
    for (size_t i = row; i < row + 16; ++i) {
      if (i < b.size()) {
        std::printf("%02x", static_cast<unsigned>(b[i]));
      } else {
        std::printf("  ");
      }
      if (i % 2 == 1) std::printf(" ");
    }
    std::printf(" ");
    for (size_t i = row; i < std::min(row + 16, b.size()); ++i) {
      const int c = static_cast<int>(b[i]);
      std::putchar(c >= 0x20 && c < 0x7f ? c : '.');
    }
    std::printf("\n");
  }
}

struct PrintOptions {
  std::optional<Position> from, to;
  bool raw = false;
  bool all = false;  // also sync, session and end markers
};

int cmd_print(const fs::path& dir, RecoveryMode mode, const PrintOptions& o) {
  if (!check_dir(dir)) return kUsage;
  auto rec = seg::recover(dir, mode);
  if (!rec) return fail_recovery(rec.error());
  uint64_t printed = 0;
  std::optional<Bytes> buf;  // the segment file of the current extent
  uint64_t loaded = 0;
  for (const auto& e : rec->extents) {
    if (o.to && Position(e.segment, e.begin) >= *o.to) break;
    if (o.from && e.end != UINT32_MAX && Position(e.segment, e.end) <= *o.from) continue;
    if (!buf || loaded != e.segment) {
      std::string err;
      buf = read_file(dir / seg::segment_file_name(e.segment), &err);
      if (!buf) {
        std::fprintf(stderr, "synclog-dump: %s\n", err.c_str());
        return kUsage;
      }
      loaded = e.segment;
    }
    for (uint32_t off = e.begin; off < e.end;) {
      const seg::Decoded d = seg::decode_record(*buf, e.segment, off);
      if (d.status != seg::Decode::ok) break;  // only for an open extent (UINT32_MAX)
      const Position at(e.segment, off);
      off += d.record.framed;
      if ((o.from && at < *o.from) || (o.to && at >= *o.to)) continue;
      const bool data = d.record.kind == seg::Kind::data;
      if (!data && !o.all) continue;
      ++printed;
      const auto payload = d.record.payload;
      if (o.raw) {
        // "<position> <kind> <length> " then the bytes and a newline: the
        // length makes the stream parseable whatever the bytes are.
        std::printf("%s %s %zu ", pos(at).c_str(), kind_name(d.record.kind), payload.size());
        std::fwrite(payload.data(), 1, payload.size(), stdout);
        std::putchar('\n');
        continue;
      }
      std::printf("%s %s %zu bytes", pos(at).c_str(), kind_name(d.record.kind), payload.size());
      if (d.record.kind == seg::Kind::sync) {
        std::printf(" (durable before this sync: %s)", pos(d.record.position_payload()).c_str());
      } else if (d.record.kind == seg::Kind::session) {
        std::printf(" (previous session ended at %s)", pos(d.record.position_payload()).c_str());
      } else if (d.record.kind == seg::Kind::loss) {
        const seg::LossRecord l = seg::decode_loss(payload);
        std::printf(" (accepted loss at %s, %" PRIu64 " bytes: %s)", pos(l.at).c_str(), l.bytes,
                    l.reason.c_str());
      }
      std::printf("\n");
      if (data) hex_dump(payload);
    }
  }
  if (!o.raw) {
    std::printf("%" PRIu64 " record(s)\n", printed);
    if (!rec->report.damage.empty()) {
      std::printf("note: recovery (%s) reported damage; see `synclog-dump verify`\n",
                  synclog::to_string(mode));
    }
  }
  return kHealthy;
}

// ---- config ----------------------------------------------------------------

int cmd_config(const fs::path& dir) {
  if (!check_dir(dir)) return kUsage;
  auto d = scan_dir(dir);
  if (!d) return kUsage;
  int rc = kHealthy;
  if (d->segments.empty()) std::printf("no segment files in %s\n", dir.c_str());
  // Segment headers record the format version, the segment size, the block
  // size and the log id. Runs of segments that agree are printed once.
  struct Run {
    uint64_t first = 0, last = 0;
    uint64_t size = 0, log_id = 0;
    uint32_t block = 0, version = 0;
  };
  std::vector<Run> runs;
  for (const auto& f : d->segments) {
    if (!f.header) {
      std::printf("segment %s: bad header: %s\n", f.name.c_str(), f.header_error.c_str());
      rc = kDamaged;
      continue;
    }
    const auto& h = *f.header;
    if (!runs.empty() && runs.back().size == h.segment_size && runs.back().block == h.block_size &&
        runs.back().log_id == h.log_id && runs.back().version == h.version) {
      runs.back().last = f.id;
    } else {
      runs.push_back(Run{f.id, f.id, h.segment_size, h.log_id, h.block_size, h.version});
    }
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
  }
  std::printf(
      "\nThe format does not record the rest of the configuration the log was written with:\n"
      "backend, segment kind, sync mode, interval/window/lag bound, spare segments, recycle,\n"
      "prezero, max_total_size, recovery mode, sync threads, queue depth, tail policy and the\n"
      "direct I/O alignment are not stored on disk. A log opens with any of them (F5).\n");
  if (!d->foreign.empty()) {
    std::printf("\nforeign file(s) (Log::open refuses this directory):");
    for (const auto& n : d->foreign) std::printf(" %s", n.c_str());
    std::printf("\n");
    rc = kDamaged;
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "synclog-dump: inspect and verify a synclog log directory (read-only; never modifies it)"};
  app.require_subcommand(1);

  std::string dir, mode_name = "tolerate-torn-tail", from, to;
  bool hex = false, raw = false, all = false;
  const std::string mode_help =
      "recovery mode: tolerate-torn-tail (Log::open's default), point-in-time, absolute or "
      "skip-damaged";

  auto* list = app.add_subcommand("list", "one row per segment file, with the durable end");
  list->add_option("dir", dir, "log directory")->required();
  list->add_option("--mode", mode_name, mode_help);

  auto* verify = app.add_subcommand(
      "verify", "run recovery read-only; exit 0 if healthy, 1 with a line per damaged region");
  verify->add_option("dir", dir, "log directory")->required();
  verify->add_option("--mode", mode_name, mode_help);

  auto* print = app.add_subcommand("print", "print the records replay returns, in log order");
  print->add_option("dir", dir, "log directory")->required();
  print->add_option("--from", from, "first position, SEG:OFF (the first record at or after it)");
  print->add_option("--to", to, "stop before this position, SEG:OFF");
  auto* hex_flag = print->add_flag("--hex", hex, "hex dump of each record (the default)");
  auto* raw_flag =
      print->add_flag("--raw", raw, "one line per record: 'SEG:OFF KIND LEN ' then the bytes");
  hex_flag->excludes(raw_flag);
  print->add_flag("--all", all, "also print sync, session and end markers");
  print->add_option("--mode", mode_name, mode_help);

  auto* config = app.add_subcommand("config", "what the segment headers record about the log");
  config->add_option("dir", dir, "log directory")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message; its exit codes vary by error, ours is 2.
    return app.exit(e) == 0 ? 0 : kUsage;
  }

  RecoveryMode mode{};
  if (!parse_mode(mode_name, &mode)) {
    std::fprintf(stderr,
                 "synclog-dump: --mode: unknown recovery mode '%s' (allowed: tolerate-torn-tail, "
                 "point-in-time, absolute, skip-damaged)\n",
                 mode_name.c_str());
    return kUsage;
  }
  if (*list) return cmd_list(dir, mode);
  if (*verify) return cmd_verify(dir, mode);
  if (*config) return cmd_config(dir);
  PrintOptions o;
  o.raw = raw;
  o.all = all;
  for (auto [text, slot] : {std::pair{&from, &o.from}, std::pair{&to, &o.to}}) {
    if (text->empty()) continue;
    Position p;
    if (!parse_position(*text, &p)) {
      std::fprintf(stderr, "synclog-dump: bad position '%s' (expected SEG:OFF, e.g. 1:64)\n",
                   text->c_str());
      return kUsage;
    }
    *slot = p;
  }
  return cmd_print(dir, mode, o);
}
