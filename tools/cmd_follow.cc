// `follow`: the reference consumer of a CDC directory (docs/dump.md). It
// prints each record once its index says it is durable, in log order, and
// never a byte past an index's offset; with --delete it removes what it has
// consumed, which is what frees cdc_max_size for the log.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

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

// The segment and its index, in that order: an index left alone names no
// file, while a segment left without its index would look unfinished.
Result<void> remove_segment(const fs::path& dir, uint64_t id) {
  for (const auto& n : {seg::segment_file_name(id), seg::cdc_index_name(id)}) {
    if (auto r = io::remove_file(dir / n); !r) return r;
  }
  return {};
}

// A record in fragments being assembled, as Reader does: printed only once
// its last fragment is read and the lengths add up; dropped (abandoned: a
// crash cut it, or its append failed) when anything but its next fragment
// follows. The segments holding its fragments are kept until then.
struct Pending {
  Position at;
  uint64_t total = 0;
  std::vector<std::byte> bytes;
  uint64_t last_segment = 0;       // where its latest fragment lies
  std::vector<uint64_t> finished;  // its segments read to their end, for --delete
};

}  // namespace

int cmd_follow(const Common& c, const FollowOptions& f) {
  std::signal(SIGINT, on_sigint);
  std::optional<Cursor> cur;
  std::optional<uint64_t> last_done;
  std::optional<Pending> pending;
  uint64_t shown = 0;
  // Lets go of the pending record (printed or abandoned): with --delete its
  // finished segments go once what was printed has left the process.
  auto resolve = [&]() -> Result<void> {
    std::vector<uint64_t> held = std::move(pending->finished);
    pending.reset();
    if (!f.remove || held.empty()) return {};
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      return make_error(Errc::io_error, "cannot write the output; segments are kept");
    }
    for (uint64_t id : held) {
      if (auto r = remove_segment(c.dir, id); !r) return r;
    }
    return {};
  };
  auto last_progress = std::chrono::steady_clock::now();
  while (!g_interrupted) {
    bool progress = false;
    if (!cur) {
      auto ids = linked_after(c.dir, last_done);
      if (!ids) return damaged(ids.error().describe());
      if (!ids->empty()) {
        cur.emplace();
        cur->id = ids->front();
        // A record's next fragment starts the very next segment.
        if (pending && cur->id != pending->last_segment + 1) {
          if (auto r = resolve(); !r) return damaged(r.error().describe());
        }
      }
    }
    if (cur) {
      auto index = seg::load_cdc_index(c.dir, cur->id);
      if (!index) return damaged(index.error().describe());
      // No index (yet): nothing of the segment is known to be durable.
      const seg::CdcIndex idx = index->value_or(seg::CdcIndex{seg::kHeaderSize, false});
      const fs::path path = c.dir / seg::segment_file_name(cur->id);
      if (!*index) {
        // Its link is gone too (the log removes the index first): a spare
        // of a crashed session, removed by the next open. What is linked
        // now is listed again.
        std::error_code ec;
        if (!fs::exists(path, ec) && !ec) {
          cur.reset();
          continue;
        }
      }
      if (!cur->reader && idx.offset > cur->off) {
        auto r = seg::SegmentReader::open(path, cur->id, idx.offset);
        if (!r && r.error().sys_errno == ENOENT) {
          cur.reset();  // removed since the index was read: list again
          continue;
        }
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
        const bool fragment = r.kind == seg::Kind::middle || r.kind == seg::Kind::last;
        if (pending && fragment && !r.sealed) {
          pending->bytes.insert(pending->bytes.end(), r.payload.begin(), r.payload.end());
          pending->last_segment = cur->id;
          if (pending->bytes.size() > pending->total ||
              (r.kind == seg::Kind::last && pending->bytes.size() != pending->total)) {
            return damaged("fragmented record at " + pending->at.to_string() + " holds " +
                           std::to_string(pending->bytes.size()) +
                           " bytes where its first fragment says " +
                           std::to_string(pending->total));
          }
          if (r.kind == seg::Kind::last) {
            show(c, pending->at, {seg::Kind::data, 0, 0, pending->bytes});
            ++shown;
            if (auto done = resolve(); !done) return damaged(done.error().describe());
          }
          continue;
        }
        if (pending) {
          // Anything but its next fragment: the record was cut.
          if (auto done = resolve(); !done) return damaged(done.error().describe());
        }
        // A fragment whose first one was consumed before, released, or cut
        // is passed over, as Reader does.
        if (fragment) continue;
        if (r.kind == seg::Kind::first && !r.sealed) {
          if (r.payload.size() < seg::kFirstFixedPayload) {
            return damaged("first fragment at " + at.to_string() + " is too short");
          }
          pending.emplace();
          pending->at = at;
          pending->last_segment = cur->id;
          std::memcpy(&pending->total, r.payload.data(), sizeof pending->total);
          pending->bytes.assign(r.payload.begin() + seg::kFirstFixedPayload, r.payload.end());
          continue;
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
        if (pending && pending->last_segment == cur->id) {
          // Its next fragment comes in the next segment: keep this one.
          cur->reader.reset();
          pending->finished.push_back(cur->id);
        } else if (f.remove) {
          // What was printed leaves the process before the segment goes.
          if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
            std::fprintf(stderr,
                         "synclog-dump: follow: cannot write the output; segment %" PRIu64
                         " is kept\n",
                         cur->id);
            return kDamaged;
          }
          cur->reader.reset();
          if (auto r = remove_segment(c.dir, cur->id); !r) return damaged(r.error().describe());
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
