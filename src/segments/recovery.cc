#include "segments/recovery.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "io/file.h"
#include "segments/batch.h"
#include "segments/format.h"
#include "segments/segment.h"
#include "segments/segment_reader.h"

namespace synclog::seg {
namespace {

// What recovery reads of each file before the walk: the header, and the
// session and loss records that follow it.
constexpr size_t kHeadBytes = 4096;

// Every I/O error fails recovery, named: what cannot be read cannot be
// judged, and judging it anyway (as missing, empty or torn) would let the new
// session fork the history.
std::unexpected<Error> io_failure(const Error& e) {
  return make_error(e.code, "recovery cannot read the log: " + e.message, e.sys_errno);
}

struct Scan {
  std::optional<uint32_t> first_valid;  // first offset at or after `from` holding a valid record
  Position max_marker;                  // largest durable position named by a sync marker
};

// Looks for valid records at every aligned offset from `from` on. Only runs
// where the ordinary walk stopped, so its cost is paid on damage or at the end.
Result<Scan> scan(SegmentReader& segment, uint64_t from) {
  Scan s;
  for (uint64_t off = from; off + kRecordHeaderSize <= segment.end();) {
    auto r = segment.record(static_cast<uint32_t>(off));
    if (!r) return io_failure(r.error());
    const Decoded& d = *r;
    if (d.status != Decode::ok) {
      off += kAlign;
      continue;
    }
    if (!s.first_valid) s.first_valid = static_cast<uint32_t>(off);
    if (d.record.kind == Kind::sync)
      s.max_marker = std::max(s.max_marker, d.record.position_payload());
    off += d.record.framed;
  }
  return s;
}

// Bytes from `from` to the last non-zero byte: what a torn write left.
Result<uint64_t> written_bytes_after(SegmentReader& segment, uint64_t from) {
  uint64_t last = from;
  for (uint64_t off = from; off < segment.end();) {
    auto chunk = segment.bytes(off, SegmentReader::kWindow);
    if (!chunk) return io_failure(chunk.error());
    if (chunk->empty()) break;
    for (size_t k = chunk->size(); k > 0; --k) {
      if ((*chunk)[k - 1] != std::byte{0}) {
        last = off + k;
        break;
      }
    }
    off += chunk->size();
  }
  return last - from;
}

// Loss records follow the session record at the start of a segment (and
// continue at the start of the next one if they did not fit).
Result<std::vector<Damage>> read_losses(SegmentReader& segment) {
  std::vector<Damage> found;
  for (uint32_t off = kHeaderSize;;) {
    auto r = segment.record(off);
    if (!r) return io_failure(r.error());
    const Decoded& d = *r;
    if (d.status != Decode::ok) break;
    if (d.record.kind == Kind::loss) {
      LossRecord l = decode_loss(d.record.payload);
      found.push_back(Damage{l.at, l.bytes, std::move(l.reason)});
    } else if (d.record.kind != Kind::session || off != kHeaderSize) {
      break;
    }
    off += d.record.framed;
  }
  return found;
}

class Recovery {
 public:
  Recovery(std::filesystem::path dir, RecoveryMode mode, Keyring* keys, bool sealed_ok)
      : dir_(std::move(dir)), mode_(mode), keys_(keys), sealed_ok_(sealed_ok && !keys) {}

  Result<Recovered> run();

 private:
  std::filesystem::path path_of(uint64_t id) const { return dir_ / segment_file_name(id); }
  Result<SegmentReader> open_segment(uint64_t id, size_t window = SegmentReader::kWindow) const {
    auto r = SegmentReader::open(path_of(id), id, UINT64_MAX, window);
    if (!r) return io_failure(r.error());
    r->set_keys(keys_);
    r->set_sealed_ok(sealed_ok_);
    return r;
  }
  // The checks of one header on its own; the log id is decided by the vote
  // in list().
  Result<SegmentHeader> check_header(uint64_t id, std::span<const std::byte> head,
                                     uint64_t file_size) const;
  // Both fail on an I/O error: a segment that cannot be read is not one
  // that holds no session record (a guess here would fork the history).
  // `ended_at` says which positions an earlier recovery may have ended the
  // log at for the walk to continue at a session record naming one.
  using EndedAt = std::function<bool(Position)>;
  Result<std::optional<size_t>> find_session_after(size_t from, const EndedAt& ended_at) const;
  Result<bool> starts_session(uint64_t id, const EndedAt& ended_at) const;
  bool unusable(uint64_t id) const {
    return std::find(unusable_.begin(), unusable_.end(), id) != unusable_.end();
  }
  Result<void> list();
  // Handles the end of valid records at `here`; returns the index of the
  // segment to continue with, or nullopt when the log ends.
  Result<std::optional<size_t>> at_gap(size_t i, SegmentReader& segment, const Decoded& d,
                                       Position here, uint32_t* resume);
  // Accepted already by an earlier open: recovery skips it in every mode.
  bool accepted_at(Position at) const {
    return std::any_of(out_.report.accepted.begin(), out_.report.accepted.end(),
                       [&](const Damage& d) { return d.at == at; });
  }
  RecoveryMode mode_at(Position at) const {
    return accepted_at(at) ? RecoveryMode::skip_damaged : mode_;
  }
  // Reports a loss this open accepts; the new session records it unless an
  // earlier one did.
  void lose(Damage d) {
    if (!accepted_at(d.at)) {
      out_.losses.push_back(
          Damage{d.at, d.bytes, d.reason + " (accepted by recovery=" + to_string(mode_) + ")"});
    }
    out_.report.damage.push_back(std::move(d));
  }
  // The default mode's answer to proven damage: which mode would accept it,
  // and at what cost.
  std::unexpected<Error> refuse(Position at, const std::string& why, uint64_t damaged,
                                uint64_t to_end) const {
    return make_error(
        Errc::corruption,
        "log damaged at segment " + std::to_string(at.segment()) + " offset " +
            std::to_string(at.offset()) + ": " + why + " (" + std::to_string(damaged) +
            " damaged bytes; recovery=" + to_string(mode_) +
            " refuses to drop acknowledged records: recovery=point-in-time would end the log "
            "here and drop the " +
            std::to_string(to_end) +
            " bytes from here on, recovery=skip-damaged would skip the damaged bytes)");
  }
  uint64_t bytes_from(size_t i, uint64_t offset) const {
    uint64_t n = 0;
    for (size_t k = i; k < ids_.size(); ++k) n += out_.kept.at(ids_[k]);
    return n - std::min(n, offset);
  }
  std::unexpected<Error> corrupt(Position at, const std::string& why) const {
    return make_error(Errc::corruption, "log damaged at segment " + std::to_string(at.segment()) +
                                            " offset " + std::to_string(at.offset()) + ": " + why +
                                            " (recovery=" + to_string(mode_) + ")");
  }

  const std::filesystem::path dir_;
  const RecoveryMode mode_;
  Keyring* const keys_;
  const bool sealed_ok_;
  std::vector<uint64_t> ids_;
  std::vector<uint64_t> unusable_;  // bad headers, already reported (skip-damaged)
  Recovered out_;
};

Result<SegmentHeader> Recovery::check_header(uint64_t id, std::span<const std::byte> head,
                                             uint64_t file_size) const {
  auto header = decode_header(head);
  if (!header) return std::unexpected(header.error());
  if (header->segment_id != id) {
    return make_error(Errc::bad_directory,
                      "header names segment " + std::to_string(header->segment_id));
  }
  if (file_size > header->segment_size) {
    return make_error(Errc::bad_directory, "file is larger than its header's segment size");
  }
  return *header;
}

Result<bool> Recovery::starts_session(uint64_t id, const EndedAt& ended_at) const {
  auto segment = open_segment(id, kHeaderSize + framed_size(kPositionPayload));
  if (!segment) return std::unexpected(segment.error());
  auto r = segment->record(kHeaderSize);
  if (!r) return io_failure(r.error());
  const Decoded& d = *r;
  return d.status == Decode::ok && d.record.kind == Kind::session &&
         ended_at(d.record.position_payload());
}

Result<std::optional<size_t>> Recovery::find_session_after(size_t from,
                                                           const EndedAt& ended_at) const {
  for (size_t j = from; j < ids_.size(); ++j) {
    auto starts = starts_session(ids_[j], ended_at);
    if (!starts) return std::unexpected(starts.error());
    if (*starts) return j;
  }
  return std::optional<size_t>();
}

namespace {
std::unexpected<Error> foreign_file(const std::string& name, const std::filesystem::path& dir) {
  return make_error(Errc::bad_directory,
                    "foreign file '" + name + "' in log directory " + dir.string() +
                        " (a log directory holds only NNNNNNNNNNNNNNNNNNNN.seg files, LOCK, "
                        "ARCHIVED and, "
                        "at the root of a filesystem, the lost+found directory)");
}
}  // namespace

Result<void> Recovery::list() {
  auto names = io::list_dir(dir_);
  if (!names) return io_failure(names.error());
  std::sort(names->begin(), names->end());
  for (const auto& name : *names) {
    uint64_t id = 0;
    if (parse_segment_file_name(name, &id)) {
      ids_.push_back(id);
    } else if (is_temp_file_name(name)) {
      out_.temp_files.push_back(name);
    } else if (name == "lost+found") {
      // A log at the root of its own filesystem shares it with fsck's
      // directory; a file of that name is still foreign.
      auto is_dir = io::is_real_dir(dir_ / name);
      if (!is_dir) return io_failure(is_dir.error());
      if (!*is_dir) return foreign_file(name, dir_);
    } else if (name != kLockFileName && name != kArchiveStateName && name != kArchiveStateTemp) {
      return foreign_file(name, dir_);
    }
  }
  std::sort(ids_.begin(), ids_.end());
  // New ids must pass every file present, even ones recovery cannot use.
  out_.next_id = ids_.empty() ? 1 : ids_.back() + 1;
  out_.report.segments = static_cast<uint32_t>(ids_.size());
  // Every header is checked up front: a bad one is named even where replay
  // would never reach it.
  std::vector<uint64_t> good;
  struct Head {
    uint64_t id = 0, size = 0, log_id = 0;
    std::vector<Damage> losses;  // what its loss records say
    std::string error;
  };
  std::vector<Head> heads;
  std::map<uint64_t, size_t> votes;  // log id -> good headers that carry it
  for (uint64_t id : ids_) {
    auto segment = open_segment(id, kHeadBytes);
    if (!segment) return std::unexpected(segment.error());
    const uint64_t size = segment->file_size();
    out_.kept[id] = size;
    auto head = segment->bytes(0, kHeaderSize);
    if (!head) return io_failure(head.error());
    Head h{id, size, 0, {}, {}};
    if (auto header = check_header(id, *head, size)) {
      // A key that cannot be had is a configuration problem, not damage:
      // no recovery mode may skip a segment for it.
      if (header->encrypted && !sealed_ok_) {
        if (!keys_) {
          return make_error(Errc::invalid_config,
                            "segment " + std::to_string(id) + " is encrypted under key id " +
                                std::to_string(header->key_id) +
                                " and no key source is configured (set encryption=aes-256-gcm "
                                "with encryption_key_file or Config::encryption_keys)");
        }
        // A wrong key (one that fails the header's key check value) is
        // refused here, in every mode, before anything is read or written.
        if (auto c = keys_->cipher(header->key_id, header->log_id, id, header->salt,
                                   key_check_of(*header));
            !c) {
          return std::unexpected(c.error());
        }
      }
      h.log_id = header->log_id;
      ++votes[h.log_id];
      auto losses = read_losses(*segment);
      if (!losses) return std::unexpected(losses.error());
      h.losses = std::move(*losses);
    } else {
      h.error = header.error().message;
    }
    heads.push_back(std::move(h));
  }
  // Which log this directory holds: the log id of more headers than any
  // other id. One file (a segment copied in from another log, under a name
  // this log used) cannot outvote the rest; a tie cannot be decided, in any
  // mode.
  size_t best = 0, ties = 0;
  for (const auto& [log_id, n] : votes) {
    if (n > best) {
      best = n;
      ties = 0;
      out_.log_id = log_id;
    } else if (n == best) {
      ++ties;
    }
  }
  if (ties > 0) {
    std::string counts;
    for (const auto& [log_id, n] : votes)
      counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " say " + std::to_string(log_id);
    return make_error(Errc::bad_directory,
                      "segment headers in " + dir_.string() +
                          " disagree on the log id and none holds a majority (" + counts +
                          "): cannot tell which files belong to this log");
  }
  std::vector<Damage> bad;
  for (Head& h : heads) {
    if (h.error.empty() && h.log_id != out_.log_id) {
      h.error = "segment belongs to another log (log id " + std::to_string(h.log_id) +
                "; this log's is " + std::to_string(out_.log_id) + ", held by " +
                std::to_string(best) + " of " + std::to_string(heads.size()) + " segment files)";
    }
    if (!h.error.empty()) {
      bad.push_back(Damage{Position(h.id, 0), h.size,
                           "segment file " + path_of(h.id).string() + ": " + h.error});
      unusable_.push_back(h.id);
      continue;
    }
    for (Damage& f : h.losses) {
      const bool known =
          std::any_of(out_.report.accepted.begin(), out_.report.accepted.end(),
                      [&](const Damage& a) { return a.at == f.at && a.bytes == f.bytes; });
      if (!known) out_.report.accepted.push_back(std::move(f));
    }
    good.push_back(h.id);
  }
  // Judged once every loss record is known: a file an earlier open skipped
  // stays skipped.
  for (Damage& d : bad) {
    if (mode_at(d.at) != RecoveryMode::skip_damaged)
      return make_error(Errc::bad_directory, d.reason);
    lose(std::move(d));
  }
  ids_ = std::move(good);
  return {};
}

Result<std::optional<size_t>> Recovery::at_gap(size_t i, SegmentReader& segment, const Decoded& d,
                                               Position here, uint32_t* resume) {
  RecoveryReport& rep = out_.report;
  auto session = find_session_after(i + 1, [&](Position p) { return p == here; });
  if (!session) return std::unexpected(session.error());
  if (auto j = *session) {
    if (*j > i + 1) {
      uint64_t bytes = 0;
      for (size_t k = i + 1; k < *j; ++k) bytes += out_.kept[ids_[k]];
      rep.damage.push_back(
          Damage{Position(ids_[i + 1], 0), bytes, "segments left behind by an earlier recovery"});
    }
    return *j;
  }
  // Markers after the gap name positions that were durable before it.
  // `d` is judged before the scans move the reader's window.
  const Decode status = d.status;
  const std::string reason = status == Decode::empty ? "unwritten bytes" : d.reason;
  auto scanned = scan(segment, here.offset());
  if (!scanned) return std::unexpected(scanned.error());
  const Scan here_scan = *scanned;
  Position proven = here_scan.max_marker;
  bool later_valid = false;
  for (size_t k = i + 1; k < ids_.size(); ++k) {
    auto later = open_segment(ids_[k]);
    if (!later) return std::unexpected(later.error());
    auto s = scan(*later, kHeaderSize);
    if (!s) return std::unexpected(s.error());
    proven = std::max(proven, s->max_marker);
    later_valid |= s->first_valid.has_value();
  }
  // A record that validates but fails authentication is damage even at
  // the end: no torn write makes one.
  if (here < proven || d.damage) {
    const std::string why =
        here < proven ? reason + " before durable position " + proven.to_string() : reason;
    const uint64_t skipped = here_scan.first_valid ? *here_scan.first_valid - here.offset()
                                                   : segment.end() - here.offset();
    switch (mode_at(here)) {
      case RecoveryMode::absolute:
        return corrupt(here, why);
      case RecoveryMode::tolerate_torn_tail:
        return refuse(here, why, skipped, bytes_from(i, here.offset()));
      case RecoveryMode::point_in_time: {
        auto written = written_bytes_after(segment, here.offset());
        if (!written) return std::unexpected(written.error());
        lose(Damage{here, *written, why});
        return std::optional<size_t>();
      }
      case RecoveryMode::skip_damaged:
        break;
    }
    lose(Damage{here, skipped, why});
    if (here_scan.first_valid) {
      *resume = *here_scan.first_valid;
      return i;
    }
    *resume = kHeaderSize;
    return i + 1;
  }
  // The end of the log. Whatever lies past it was never acknowledged.
  const bool torn = status != Decode::empty || here_scan.first_valid || later_valid;
  if (torn) {
    if (mode_ == RecoveryMode::absolute) return corrupt(here, "torn write (" + reason + ")");
    rep.torn_tail = true;
    auto written = written_bytes_after(segment, here.offset());
    if (!written) return std::unexpected(written.error());
    rep.torn_bytes = *written;
  }
  // No sync completed past here, so no later file holds an acknowledged
  // record: they all go before the new session writes anything. Left on
  // disk, one holding records would be replayed as the log's start once a
  // release removed the files before it (phantoms, then the gap as damage).
  // Highest id first: a crash part-way leaves a prefix of them, which the
  // next recovery judges the same way.
  out_.discard.clear();
  for (size_t k = ids_.size(); k > i + 1; --k) out_.discard.push_back(ids_[k - 1]);
  return std::optional<size_t>();
}

Result<Recovered> Recovery::run() {
  if (auto r = list(); !r) return std::unexpected(r.error());
  RecoveryReport& rep = out_.report;
  size_t i = 0;
  uint32_t start = kHeaderSize;
  bool in_fragments = false;  // the last record read was a first or middle fragment
  while (i < ids_.size()) {
    const uint64_t id = ids_[i];
    auto segment = open_segment(id);
    if (!segment) return std::unexpected(segment.error());
    uint32_t off = start;
    uint32_t begin = start;
    constexpr size_t kEnd = SIZE_MAX;  // the log ends in this segment
    size_t next = kEnd;
    for (;;) {
      auto decoded = segment->record(off);
      if (!decoded) return io_failure(decoded.error());
      const Decoded d = *decoded;
      if (d.status == Decode::ok && d.record.kind != Kind::end) {
        // A fragmented record counts once, if it is whole: replay passes
        // over an abandoned one and over fragments whose first is gone.
        const Kind kind = d.record.kind;
        if (kind == Kind::last && in_fragments) ++rep.records;
        in_fragments = kind == Kind::first || (kind == Kind::middle && in_fragments);
        if (d.record.kind == Kind::data) ++rep.records;
        // (A sealed batch's count is encrypted: not counted.)
        if (d.record.kind == Kind::batch && !d.record.sealed) rep.records += batch_count(d.record);
        off += d.record.framed;
        continue;
      }
      if (d.status == Decode::ok) {  // end of segment
        off += d.record.framed;
        out_.extents.push_back(Extent{id, begin, off});
        rep.end = Position(id, off);
        if (i + 1 < ids_.size()) {
          next = i + 1;
          // Ids skipped for bad headers were reported already.
          uint64_t missing = id + 1;
          while (missing < ids_[i + 1] && unusable(missing)) ++missing;
          if (missing != ids_[i + 1]) {
            // A gap in the ids is fine only where a later session says the
            // log ended here (an earlier recovery stopped at this point), or
            // inside a file skipped for its bad header, whose records cannot
            // be read to find that end (reported already).
            const Position end = rep.end;
            const uint64_t next_id = ids_[i + 1];
            auto session = find_session_after(i + 1, [&](Position p) {
              return p == end ||
                     (p.segment() > id && p.segment() < next_id && unusable(p.segment()));
            });
            if (!session) return std::unexpected(session.error());
            if (auto j = *session) {
              if (*j > i + 1) {
                uint64_t bytes = 0;
                for (size_t k = i + 1; k < *j; ++k) bytes += out_.kept[ids_[k]];
                rep.damage.push_back(Damage{Position(ids_[i + 1], 0), bytes,
                                            "segments left behind by an earlier recovery"});
              }
              next = *j;
            } else {
              const Position gone(missing, 0);
              const std::string why = "segment " + std::to_string(missing) + " is missing";
              switch (mode_at(gone)) {
                case RecoveryMode::absolute:
                  return corrupt(gone, why);
                case RecoveryMode::tolerate_torn_tail:
                  return refuse(gone, why, 0, bytes_from(i + 1, 0));
                case RecoveryMode::point_in_time:
                  next = kEnd;
                  break;
                case RecoveryMode::skip_damaged:
                  break;
              }
              lose(Damage{gone, 0, why});
            }
          }
        }
        start = kHeaderSize;
        break;
      }
      const Position here(id, off);
      in_fragments = false;
      if (off > begin) out_.extents.push_back(Extent{id, begin, off});
      rep.end = here;
      uint32_t resume = kHeaderSize;
      auto step = at_gap(i, *segment, d, here, &resume);
      if (!step) return std::unexpected(step.error());
      if (*step && **step == i) {  // skip mode found valid records further on
        off = begin = resume;
        continue;
      }
      next = step->value_or(kEnd);
      start = resume;
      break;
    }
    if (next == kEnd) break;
    i = next;
  }
  // Count only what replay returns: records in discarded segments were never acknowledged.
  for (uint64_t id : out_.discard) out_.kept.erase(id);
  return std::move(out_);
}

}  // namespace

Result<Recovered> recover(const std::filesystem::path& dir, RecoveryMode mode, Keyring* keys,
                          bool sealed_ok) {
  return Recovery(dir, mode, keys, sealed_ok).run();
}

}  // namespace synclog::seg
