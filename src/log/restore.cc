// Restore (include/synclog/restore.h): copy the chain into a staging
// directory, let recovery judge it, cut it at the stop point, let recovery
// judge the result, then rename it into place. Recovery is the only parser
// that decides what the restored log holds.
#include "synclog/restore.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "io/file.h"
#include "log/archive_state.h"
#include "log/dir_lock.h"
#include "segments/format.h"
#include "segments/recovery.h"
#include "segments/restore_cut.h"
#include "segments/segment.h"
#include "segments/segment_reader.h"
#include "segments/transform.h"
#include "synclog/config.h"

namespace synclog {
namespace {

namespace fs = std::filesystem;

constexpr size_t kCopyChunk = size_t{1} << 20;

// Segment files in `dir` by id; other names are not the restore's business.
Result<std::map<uint64_t, fs::path>> segment_files(const fs::path& dir) {
  auto names = io::list_dir(dir);
  if (!names) return std::unexpected(names.error());
  std::map<uint64_t, fs::path> out;
  for (const auto& name : *names) {
    uint64_t id = 0;
    if (seg::parse_segment_file_name(name, &id)) out[id] = dir / name;
  }
  return out;
}

Result<bool> same_bytes(const fs::path& a, const fs::path& b) {
  auto fa = io::File::open(a, io::File::Mode::read);
  if (!fa) return std::unexpected(fa.error());
  auto fb = io::File::open(b, io::File::Mode::read);
  if (!fb) return std::unexpected(fb.error());
  std::vector<std::byte> ba(kCopyChunk), bb(kCopyChunk);
  for (uint64_t off = 0;; off += kCopyChunk) {
    auto na = fa->read_at(off, ba);
    if (!na) return std::unexpected(na.error());
    auto nb = fb->read_at(off, bb);
    if (!nb) return std::unexpected(nb.error());
    if (*na != *nb || !std::equal(ba.begin(), ba.begin() + *na, bb.begin())) return false;
    if (*na < kCopyChunk) return true;
  }
}

Result<void> copy_file(const fs::path& from, const fs::path& to, uint32_t perms) {
  auto in = io::File::open(from, io::File::Mode::read);
  if (!in) return std::unexpected(in.error());
  auto out = io::File::open(to, io::File::Mode::create_new, perms);
  if (!out) return std::unexpected(out.error());
  std::vector<std::byte> buf(kCopyChunk);
  for (uint64_t off = 0;; off += kCopyChunk) {
    auto n = in->read_at(off, buf);
    if (!n) return std::unexpected(n.error());
    if (auto w = out->write_at(off, std::span(buf).first(*n)); !w) return w;
    if (*n < kCopyChunk) break;
  }
  return out->sync();
}

std::string ids_text(const std::vector<uint64_t>& ids) {
  std::string s;
  for (uint64_t id : ids) s += (s.empty() ? "" : ", ") + std::to_string(id);
  return s;
}

class Restore {
 public:
  explicit Restore(const RestoreOptions& o)
      : o_(o),
        staging_(o.target.string() + ".restoring"),
        perms_(o.group_read ? 0640 : 0600),
        dir_perms_(o.group_read ? 0750 : 0700) {}

  Result<RestoreReport> run() {
    auto r = build();
    if (r || !staging_made_) return r;
    // Nothing of a failed restore stays: a partial log must never be
    // mistaken for a restored one.
    Error e = r.error();
    if (auto cleaned = remove_staging(); !cleaned) {
      e.message += "; the partial restore in " + staging_.string() +
                   " could not be removed (remove it by hand): " + cleaned.error().message;
    }
    return std::unexpected(e);
  }

 private:
  Result<void> check_options();
  Result<void> load_keys();
  Result<void> same_log(const std::map<uint64_t, fs::path>& archived,
                        const std::map<uint64_t, fs::path>& live) const;
  Result<RestoreReport> build();
  Result<void> remove_staging();

  const RestoreOptions& o_;
  const fs::path staging_;
  const uint32_t perms_, dir_perms_;
  bool staging_made_ = false;
  DirLock live_lock_;
  std::unique_ptr<seg::Keyring> keys_;  // none without a key source
};

Result<void> Restore::check_options() {
  if (o_.archive.empty() || o_.target.empty()) {
    return make_error(Errc::invalid_argument, "restore needs an archive and a target directory");
  }
  auto archive = io::is_real_dir(o_.archive);
  if (!archive || !*archive) {
    return make_error(Errc::bad_directory,
                      "restore: archive " + o_.archive.string() + " is not a directory" +
                          (archive ? std::string() : ": " + archive.error().message));
  }
  for (const fs::path& p : {o_.target, staging_}) {
    auto there = io::exists(p);
    if (!there) return std::unexpected(there.error());
    if (*there) {
      return make_error(
          Errc::bad_directory,
          "restore: " + p.string() +
              (p == o_.target ? " exists: a restore builds a new log directory, never into one"
                              : " exists: left by an interrupted restore; remove it"));
    }
  }
  if (!o_.encryption_key_file.empty() && o_.encryption_keys) {
    return make_error(Errc::invalid_argument,
                      "restore: encryption_key_file and encryption_keys are both set; set at "
                      "most one");
  }
  const fs::path parent = o_.target.parent_path().empty() ? "." : o_.target.parent_path();
  auto parent_ok = io::is_real_dir(parent);
  if (!parent_ok || !*parent_ok) {
    return make_error(Errc::bad_directory,
                      "restore: the target's parent " + parent.string() + " is not a directory");
  }
  return {};
}

// The same key sources Log::open takes (log.cc), so the restored log
// opens with the keys that restored it.
Result<void> Restore::load_keys() {
  KeySource source = o_.encryption_keys;
  if (!source && !o_.encryption_key_file.empty()) {
    auto loaded = seg::key_source_from_file(o_.encryption_key_file);
    if (!loaded) return make_error(loaded.error().code, "restore: " + loaded.error().message);
    source = std::move(*loaded);
  }
  if (source) keys_ = std::make_unique<seg::Keyring>(std::move(source));
  return {};
}

// The log id in the header of a directory's first segment; none if it has
// none or the header does not decode (recovery judges that later).
std::optional<uint64_t> first_log_id(const std::map<uint64_t, fs::path>& files) {
  if (files.empty()) return std::nullopt;
  auto reader = seg::SegmentReader::open(files.begin()->second, files.begin()->first);
  if (!reader) return std::nullopt;
  auto header = reader->header();
  if (!header) return std::nullopt;
  return header->log_id;
}

std::string hex_id(uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Segments of two logs never form one chain: say so, naming both, before
// any copy would be judged "damaged".
Result<void> Restore::same_log(const std::map<uint64_t, fs::path>& archived,
                               const std::map<uint64_t, fs::path>& live) const {
  const auto a = first_log_id(archived), l = first_log_id(live);
  if (!a || !l || *a == *l) return {};
  return make_error(Errc::bad_directory,
                    "restore: the archive " + o_.archive.string() + " holds log " + hex_id(*a) +
                        " and the live directory " + o_.live.string() + " log " + hex_id(*l) +
                        ": two different logs (name the archive and the directory of one log)");
}

Result<RestoreReport> Restore::build() {
  if (auto r = check_options(); !r) return std::unexpected(r.error());
  if (auto r = load_keys(); !r) return std::unexpected(r.error());
  RestoreReport report;
  report.stop = o_.stop;
  auto archived = segment_files(o_.archive);
  if (!archived) return std::unexpected(archived.error());
  std::map<uint64_t, fs::path> live;
  if (!o_.live.empty()) {
    // A live directory named is one the operator means to restore from: a
    // typo must not become an archive-only restore, and a directory that
    // is not a log gets nothing written into it (no LOCK).
    auto there = io::exists(o_.live);
    if (!there) return std::unexpected(there.error());
    const std::string leave_out =
        " (leave the live directory out to restore from the archive alone)";
    if (!*there) {
      return make_error(Errc::bad_directory, "restore: the live directory " + o_.live.string() +
                                                 " does not exist" + leave_out);
    }
    auto is_dir = io::is_real_dir(o_.live);
    if (!is_dir) return std::unexpected(is_dir.error());
    if (!*is_dir) {
      return make_error(Errc::bad_directory,
                        "restore: the live directory " + o_.live.string() + " is not a directory");
    }
    auto found = segment_files(o_.live);
    if (!found) return std::unexpected(found.error());
    if (found->empty()) {
      return make_error(Errc::bad_directory, "restore: " + o_.live.string() +
                                                 " is not a log directory: it holds no segment "
                                                 "file" +
                                                 leave_out);
    }
    {
      // Held for the copy: a process that opened the log meanwhile would
      // write (a new session, recovery's deletions) under the copy.
      Config c;
      c.dir = o_.live;
      c.group_read = o_.group_read;
      auto lock = DirLock::acquire(c);
      if (!lock) return make_error(lock.error().code, "restore: " + lock.error().message);
      lock->keep();  // leave the LOCK file as found (or empty, if there was none)
      live_lock_ = std::move(*lock);
      auto files = segment_files(o_.live);
      if (!files) return std::unexpected(files.error());
      live = std::move(*files);
    }
  }
  if (auto r = same_log(*archived, live); !r) return std::unexpected(r.error());
  // ARCHIVED in the live directory confirms the copies up to its id: each
  // was complete before it was recorded. A later copy may be one a crash
  // or power cut interrupted.
  uint64_t confirmed = 0;
  if (!live.empty()) {
    auto state = load_archive_state(o_.live);
    if (!state) return make_error(state.error().code, "restore: " + state.error().message);
    if (*state && (*state)->log_id == first_log_id(live)) confirmed = (*state)->through;
  }
  auto made = io::create_dir(staging_, dir_perms_);
  if (!made) return std::unexpected(made.error());
  if (!*made) {  // made since the check: another restore into the same target
    return make_error(Errc::bad_directory,
                      "restore: " + staging_.string() + " appeared: another restore is running");
  }
  staging_made_ = true;

  std::map<uint64_t, bool> from_archive;  // id -> copied from the archive
  std::optional<Position> crashed_end;    // an archived segment a crash ended
  for (const auto& [id, path] : *archived) from_archive[id] = true;
  for (const auto& [id, path] : live) from_archive.emplace(id, false);
  for (const auto& [id, archive] : from_archive) {
    const fs::path to = staging_ / seg::segment_file_name(id);
    if (!archive) {
      report.from_live.push_back(id);
      if (auto r = copy_file(live.at(id), to, perms_); !r) return std::unexpected(r.error());
      continue;
    }
    if (auto in_live = live.find(id); in_live != live.end()) {
      // A segment is archived once complete and never written after that,
      // so two copies that differ, the archived one confirmed by ARCHIVED,
      // mean one is damaged: refuse to choose.
      auto same = same_bytes(archived->at(id), in_live->second);
      if (!same) return std::unexpected(same.error());
      if (!*same && id > confirmed) {
        // Never confirmed by ARCHIVED: the live copy is the segment.
        from_archive[id] = false;
        report.from_live.push_back(id);
        if (auto r = copy_file(in_live->second, to, perms_); !r) return std::unexpected(r.error());
        continue;
      }
      if (!*same) {
        return make_error(Errc::corruption, "restore: segment " + std::to_string(id) +
                                                " differs between the archive (" +
                                                archived->at(id).string() +
                                                ") and the live directory (" +
                                                in_live->second.string() + "): one is damaged");
      }
      report.in_both.push_back(id);
    } else {
      report.from_archive.push_back(id);
    }
    if (auto r = copy_file(archived->at(id), to, perms_); !r) return std::unexpected(r.error());
  }
  if (auto r = io::sync_dir(staging_); !r) return std::unexpected(r.error());

  auto rec = seg::recover(staging_, RecoveryMode::tolerate_torn_tail, keys_.get());
  if (!rec) {
    // Recovery's hint names Config's keys; a restore takes its own.
    const std::string hint =
        !keys_ && rec.error().code == Errc::invalid_config
            ? " (an encrypted log needs its keys: RestoreOptions::encryption_key_file or "
              "encryption_keys, synclog-restore --key-file)"
            : "";
    return make_error(rec.error().code,
                      "restore: the segments of " + o_.archive.string() +
                          (o_.live.empty() ? "" : " and " + o_.live.string()) + " (copied to " +
                          staging_.string() +
                          ") do not form a log recovery accepts: " + rec.error().message + hint,
                      rec.error().sys_errno);
  }
  // An archived segment is complete: the log can end in one just past its
  // end record, or where a crashed session's last segment ends (its copy
  // whole, no end record after). Anything else is a damaged or truncated
  // copy, which recovery alone would take for an unfinished write.
  const Position end = rec->report.end;
  if (from_archive.count(end.segment()) && from_archive.at(end.segment())) {
    const fs::path copy = staging_ / seg::segment_file_name(end.segment());
    bool sealed = false;
    if (end.offset() >= seg::kHeaderSize + seg::kRecordHeaderSize && !rec->report.torn_tail) {
      auto reader = seg::SegmentReader::open(copy, end.segment());
      if (!reader) return std::unexpected(reader.error());
      auto last = reader->frame(end.offset() - seg::kRecordHeaderSize);
      if (!last) return std::unexpected(last.error());
      sealed = last->status == seg::Decode::ok && last->record.kind == seg::Kind::end;
    }
    if (!sealed) {
      if (auto r = seg::check_crashed_end(copy, end); !r) {
        Error e = r.error();
        e.message += " (copied from " + archived->at(end.segment()).string() + ")";
        return std::unexpected(e);
      }
      crashed_end = end;
    }
  }

  auto cut =
      seg::find_cut(staging_, *rec, seg::CutRule{o_.stop, o_.position, o_.time_ns}, keys_.get());
  if (!cut) return std::unexpected(cut.error());
  if (auto r = seg::write_cut(staging_, cut->at); !r) return std::unexpected(r.error());
  // Highest first, as recovery discards: a crash part-way leaves a prefix
  // (and the staging directory, which no open takes for a log).
  for (auto it = from_archive.rbegin(); it != from_archive.rend(); ++it) {
    if (it->first <= cut->at.segment()) break;
    if (auto r = io::remove_file(staging_ / seg::segment_file_name(it->first)); !r) {
      return std::unexpected(r.error());
    }
    report.dropped.insert(report.dropped.begin(), it->first);
  }
  if (auto r = io::sync_dir(staging_); !r) return std::unexpected(r.error());

  // What Log::open will find: exactly the records kept, ending cleanly.
  const Position want_end(cut->at.segment(), cut->at.offset() + seg::kRecordHeaderSize);
  auto check = seg::recover(staging_, RecoveryMode::tolerate_torn_tail, keys_.get());
  if (!check) return std::unexpected(check.error());
  if (check->report.end != want_end || check->report.torn_tail ||
      check->report.records != cut->records) {
    return make_error(Errc::corruption,
                      "restore: the cut log does not recover as planned (ends at " +
                          check->report.end.to_string() + " with " +
                          std::to_string(check->report.records) + " records; expected " +
                          want_end.to_string() + " with " + std::to_string(cut->records) + ")");
  }

  if (auto r = io::rename_file(staging_, o_.target); !r) return std::unexpected(r.error());
  staging_made_ = false;
  const fs::path parent = o_.target.parent_path().empty() ? "." : o_.target.parent_path();
  if (auto r = io::sync_dir(parent); !r) return std::unexpected(r.error());

  report.records = cut->records;
  report.last = cut->last;
  report.end = want_end;
  report.reason = cut->reason;
  if (!report.dropped.empty()) {
    report.reason += "; dropped segments " + ids_text(report.dropped);
  }
  if (crashed_end) {
    report.reason += "; archived segment " + std::to_string(crashed_end->segment()) +
                     " ends without an end record at " + crashed_end->to_string() +
                     ", where the session writing it crashed";
  }
  return report;
}

Result<void> Restore::remove_staging() {
  auto names = io::list_dir(staging_);
  if (!names) return std::unexpected(names.error());
  for (const auto& name : *names) {
    uint64_t id = 0;
    // Only what this restore made; anything else keeps the directory.
    if (!seg::parse_segment_file_name(name, &id)) continue;
    if (auto r = io::remove_file(staging_ / name); !r) return r;
  }
  return io::remove_dir(staging_);
}

}  // namespace

const char* to_string(RestoreStop v) {
  switch (v) {
    case RestoreStop::end:
      return "end";
    case RestoreStop::position:
      return "position";
    case RestoreStop::time:
      return "time";
  }
  return "?";
}

Result<RestoreReport> restore(const RestoreOptions& options) { return Restore(options).run(); }

}  // namespace synclog
