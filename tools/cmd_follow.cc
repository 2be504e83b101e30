// `follow`: the reference consumer of a CDC directory (docs/dump.md). It
// prints each record once its index says it is durable, in log order, and
// never a byte past an index's offset; with --delete it removes what it has
// consumed, which is what frees cdc_max_size for the log.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <thread>

#include "dump.h"
#include "io/file.h"
#include "json_out.h"
#include "payload_text.h"
#include "segments/batch.h"
#include "segments/cdc_index.h"
#include "segments/segment.h"
#include "segments/segment_reader.h"

namespace synclog::dump {
namespace {

// Nothing tells a consumer in another process that an index changed: it
// looks this often.
constexpr auto kPoll = std::chrono::milliseconds(10);

volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_sigint(int) { g_interrupted = 1; }

bool user_kind(seg::Kind k) {
  return k == seg::Kind::data || k == seg::Kind::first || k == seg::Kind::middle ||
         k == seg::Kind::last;
}

void show(const Common& c, Position at, const seg::RecordView& r) {
  // Encrypted and no key given: say so, never print ciphertext as a record.
  if (c.json) {
    json j = {{"position", to_json(at)},
              {"segment", at.segment()},
              {"offset", at.offset()},
              {"kind", kind_name(r.kind)},
              {"size", r.payload.size()}};
    if (r.sealed) {
      j["encrypted_without_key"] = true;
    } else {
      j["payload_hex"] = hex_string(r.payload);
    }
    emit(j);
    return;
  }
  std::printf("%s %s %zu bytes %s\n", at.to_string().c_str(), kind_name(r.kind), r.payload.size(),
              r.sealed ? "(encrypted; pass --key-file to decrypt)" : preview(r.payload).c_str());
}

// The segment ids linked in `dir` above `after`, ascending.
Result<std::vector<uint64_t>> linked_after(const fs::path& dir, std::optional<uint64_t> after) {
  auto names = io::list_dir(dir);
  if (!names) return std::unexpected(names.error());
  std::vector<uint64_t> ids;
  for (const auto& n : *names) {
    uint64_t id = 0;
    if (seg::parse_segment_file_name(n, &id) && (!after || id > *after)) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Reading one linked segment up to what its index says is durable.
struct Cursor {
  uint64_t id = 0;
  uint32_t off = seg::kHeaderSize;
  std::optional<seg::SegmentReader> reader;
  bool finished = false;  // complete, and read to its end
};

int damaged(const std::string& what) {
  std::fflush(stdout);
  std::fprintf(stderr, "synclog-dump: follow: %s\n", what.c_str());
  return kDamaged;
}

}  // namespace

int cmd_follow(const Common& c, const FollowOptions& f) {
  std::signal(SIGINT, on_sigint);
  std::optional<Cursor> cur;
  std::optional<uint64_t> last_done;
  uint64_t shown = 0;
  auto last_progress = std::chrono::steady_clock::now();
  while (!g_interrupted) {
    bool progress = false;
    if (!cur) {
      auto ids = linked_after(c.dir, last_done);
      if (!ids) return damaged(ids.error().describe());
      if (!ids->empty()) cur = Cursor{.id = ids->front()};
    }
    if (cur) {
      auto index = seg::load_cdc_index(c.dir, cur->id);
      if (!index) return damaged(index.error().describe());
      // No index (yet): nothing of the segment is known to be durable.
      const seg::CdcIndex idx = index->value_or(seg::CdcIndex{seg::kHeaderSize, false});
      const fs::path path = c.dir / seg::segment_file_name(cur->id);
      if (!cur->reader && idx.offset > cur->off) {
        auto r = seg::SegmentReader::open(path, cur->id, idx.offset);
        if (!r) return damaged(r.error().describe());
        cur->reader = std::move(*r);
        cur->reader->set_keys(c.keys.get());
        cur->reader->set_sealed_ok(c.keys == nullptr);
      }
      if (cur->reader) cur->reader->set_limit(idx.offset);
      while (cur->reader && cur->off < idx.offset && !cur->finished) {
        auto d = cur->reader->record(cur->off);
        if (!d) return damaged(d.error().describe());
        if (d->status != seg::Decode::ok) {
          return damaged("segment " + std::to_string(cur->id) + " offset " +
                         std::to_string(cur->off) + ": no valid record below the durable offset " +
                         std::to_string(idx.offset) + " its index names (" +
                         (d->reason ? d->reason : "empty") + ")");
        }
        const seg::RecordView& r = d->record;
        const Position at(cur->id, cur->off);
        cur->off += r.framed;
        progress = true;
        if (r.kind == seg::Kind::end) {
          cur->finished = true;
          break;
        }
        if (r.kind == seg::Kind::batch && !r.sealed) {
          for (auto in = seg::first_inner(r); in; in = seg::next_inner(r, *in)) {
            show(c, Position(cur->id, in->offset),
                 {seg::Kind::data, in->offset, in->framed, in->data});
            ++shown;
          }
        } else if (user_kind(r.kind) || r.kind == seg::Kind::batch) {
          show(c, at, r);
          ++shown;
        }
      }
      if (idx.completed && cur->off >= idx.offset) cur->finished = true;
      if (cur->finished && idx.completed) {
        if (f.remove) {
          // What was printed leaves the process before the segment goes.
          if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
            std::fprintf(stderr,
                         "synclog-dump: follow: cannot write the output; segment %" PRIu64
                         " is kept\n",
                         cur->id);
            return kDamaged;
          }
          cur->reader.reset();
          // The segment first: an index left alone names no file, while a
          // segment left without its index would look unfinished.
          for (const auto& n : {seg::segment_file_name(cur->id), seg::cdc_index_name(cur->id)}) {
            if (auto r = io::remove_file(c.dir / n); !r) return damaged(r.error().describe());
          }
        }
        last_done = cur->id;
        cur.reset();
        progress = true;
        continue;  // the next segment at once
      }
    }
    std::fflush(stdout);
    const auto now = std::chrono::steady_clock::now();
    if (progress) last_progress = now;
    if (f.until_idle && now - last_progress >= *f.until_idle) break;
    if (!progress) std::this_thread::sleep_for(kPoll);
  }
  std::fflush(stdout);
  std::fprintf(stderr, "%" PRIu64 " record(s)\n", shown);
  return kHealthy;
}

}  // namespace synclog::dump
