// `print`: the records replay returns, in log order, one line each (or a
// hex dump, raw bytes, or JSON Lines).
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "dump.h"
#include "io/terminal.h"
#include "json_out.h"
#include "payload_text.h"
#include "record_walk.h"
#include "segments/batch.h"
#include "segments/recovery.h"

namespace synclog::dump {

namespace {

// How a record was stored, if transformed: "lz4", "zstd", "aes-256-gcm",
// "lz4+aes-256-gcm"...; empty for a plain one.
std::string stored_as(const seg::RecordView& r) {
  const uint32_t code = (r.flags & seg::kCompressionMask) >> seg::kCompressionShift;
  std::string s = code == seg::kCompressionLz4    ? "lz4"
                  : code == seg::kCompressionZstd ? "zstd"
                                                  : "";
  if (r.flags & seg::kEncryptedFlag) s += s.empty() ? "aes-256-gcm" : "+aes-256-gcm";
  return s;
}

// What a marker's payload says, in words; empty for data and end records.
std::string marker_detail(const seg::RecordView& r, uint32_t version) {
  if (r.sealed) return "(encrypted; pass --key-file to decrypt)";
  switch (r.kind) {
    case seg::Kind::sync: {
      const auto began = r.marker_time(version);
      return "(durable before this sync: " + r.position_payload().to_string() +
             (began ? "; it began at " + std::to_string(*began) + " ns" : std::string()) + ")";
    }
    case seg::Kind::session:
      return "(previous session ended at " + r.position_payload().to_string() + ")";
    case seg::Kind::loss: {
      const seg::LossRecord l = seg::decode_loss(r.payload);
      return "(accepted loss at " + l.at.to_string() + ", " + std::to_string(l.bytes) +
             " bytes: " + l.reason + ")";
    }
    case seg::Kind::batch:
      return "(the " + std::to_string(seg::batch_count(r)) + " records that follow, all or none)";
    case seg::Kind::first: {
      uint64_t total = 0;
      std::memcpy(&total, r.payload.data(), sizeof total);
      return "(first fragment of a record of " + std::to_string(total) + " bytes)";
    }
    case seg::Kind::middle:
    case seg::Kind::last:
      return "(fragment)";
    default:
      return {};
  }
}

json record_json(Position at, const seg::RecordView& r, uint32_t version) {
  json j = {{"position", to_json(at)},   {"segment", at.segment()},  {"offset", at.offset()},
            {"kind", kind_name(r.kind)}, {"size", r.payload.size()}, {"framed", r.framed}};
  if (r.kind == seg::Kind::sync) {
    j["durable_before"] = to_json(r.position_payload());
    if (const auto began = r.marker_time(version)) j["began_ns"] = *began;
  }
  if (r.kind == seg::Kind::session) j["previous_end"] = to_json(r.position_payload());
  if (r.kind == seg::Kind::batch && !r.sealed) j["records"] = seg::batch_count(r);
  if (!stored_as(r).empty()) j["stored_as"] = stored_as(r);
  if (r.sealed) j["encrypted_without_key"] = true;
  if (r.kind == seg::Kind::loss) {
    const seg::LossRecord l = seg::decode_loss(r.payload);
    j["loss"] = {{"position", to_json(l.at)}, {"bytes", l.bytes}, {"reason", l.reason}};
  }
  j["payload_hex"] = hex_string(r.payload);
  return j;
}

void print_record(PrintFormat format, Position at, const seg::RecordView& r, uint32_t version) {
  const auto payload = r.payload;
  if (format == PrintFormat::raw) {
    // "<position> <kind> <length> " then the bytes and a newline: the length
    // makes the stream parseable whatever the bytes are.
    std::printf("%s %s %zu ", at.to_string().c_str(), kind_name(r.kind), payload.size());
    std::fwrite(payload.data(), 1, payload.size(), stdout);
    std::putchar('\n');
    return;
  }
  const bool data = r.kind == seg::Kind::data && !r.sealed;
  const std::string detail =
      data ? (format == PrintFormat::line ? preview(payload) : "") : marker_detail(r, version);
  const std::string how = stored_as(r);
  std::printf("%s %s %zu bytes%s%s%s%s\n", at.to_string().c_str(), kind_name(r.kind),
              payload.size(), how.empty() ? "" : " [", how.empty() ? "" : (how + "]").c_str(),
              detail.empty() ? "" : " ", detail.c_str());
  if (data && format == PrintFormat::hex) print_hex_dump(payload);
}

}  // namespace

int cmd_print(const Common& c, const Range& range, PrintFormat format, bool all) {
  if (format == PrintFormat::raw && io::is_terminal(STDOUT_FILENO)) {
    std::fprintf(stderr,
                 "synclog-dump: print --raw writes the records' bytes as they are; refusing to "
                 "write them to a terminal (redirect stdout to a file or a pipe, or drop --raw)\n");
    return kUsage;
  }
  auto rec = recover_for(c, c.mode);
  if (!rec) return fail_recovery(rec.error());
  uint64_t shown = 0;
  std::optional<Position> next;  // the first record past --limit
  uint32_t version = 0;          // of the segment being walked
  auto walked = walk_records(
      c.dir, *rec, range,
      [&](Position at, const seg::RecordView& r) {
        // Fragments are shown as they lie; replay returns a record whole only
        // when every fragment is there (docs/format.md).
        const bool user = r.kind == seg::Kind::data || r.kind == seg::Kind::first ||
                          r.kind == seg::Kind::middle || r.kind == seg::Kind::last;
        if (!user && !all) return true;
        if (range.limit && shown == *range.limit) {
          next = at;
          return false;
        }
        ++shown;
        if (c.json) {
          emit(record_json(at, r, version));
        } else {
          print_record(format, at, r, version);
        }
        return true;
      },
      c.keys.get(), &version);
  if (!walked) return fail_recovery(walked.error());
  // Everything but the records goes to stderr: stdout has one line (or one
  // raw record) per record and nothing else.
  if (!c.json && format != PrintFormat::raw) {
    std::fprintf(stderr, "%" PRIu64 " record(s)\n", shown);
  }
  if (next) note_limit(*range.limit, *next);
  if (!rec->report.damage.empty()) {
    std::fprintf(stderr,
                 "synclog-dump: note: recovery (%s) reported damage; see `synclog-dump verify`\n",
                 mode_name(c.mode).c_str());
  }
  return kHealthy;
}

}  // namespace synclog::dump
