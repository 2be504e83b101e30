// Log::segments(), disk_bytes() and oldest(): what the log holds on disk.
// The manager knows the files; where records lie in them is learnt by
// reading the log, as a replay would, and remembered per segment.
#include <algorithm>
#include <cerrno>

#include "io/file.h"
#include "log/log_impl.h"
#include "segments/batch.h"
#include "segments/format.h"
#include "segments/segment_reader.h"

namespace synclog {
namespace {

// A segment released while the scan read it ends that scan with
// Errc::released; the next attempt starts from the files left.
constexpr int kAttempts = 4;

bool is_log(const seg::FileInfo& f) { return f.role == seg::FileInfo::Role::log; }

// Reads on from the oldest segment whose bounds may still grow; called with
// bounds_mu held. Segments wholly before `durable` are complete afterwards.
Result<void> scan_bounds(const Log& log, std::map<uint64_t, Log::Impl::Bounds>& bounds,
                         const std::vector<seg::FileInfo>& files, Position durable) {
  std::optional<Position> from;
  for (const auto& f : files) {
    if (!is_log(f)) continue;
    const auto& b = bounds[f.id];
    if (!b.complete) {
      from = b.last.value_or(Position(f.id, 0));
      break;
    }
  }
  if (!from) return {};
  auto reader = log.read(*from);
  if (!reader) return std::unexpected(reader.error());
  for (;;) {
    auto rec = reader->next();
    if (!rec) return std::unexpected(rec.error());
    if (!*rec) break;
    auto& b = bounds[(*rec)->position.segment()];
    if (!b.first) b.first = (*rec)->position;
    b.last = (*rec)->position;
  }
  for (const auto& f : files) {
    if (is_log(f) && f.id < durable.segment()) bounds[f.id].complete = true;
  }
  return {};
}

// The first record in the extents before `limit`. release_before
// reports it after every release, so it must not cost a segment's read: the
// streaming reader reads from the extent's start only as far as that record
// (a small window, more only for a record larger than it).
Result<std::optional<Position>> first_record(const Log& log, const std::filesystem::path& dir,
                                             const std::vector<seg::Extent>& extents,
                                             Position limit, seg::Keyring* keys) {
  constexpr size_t kFirstRead = 64 << 10;
  for (const auto& e : extents) {
    if (e.segment > limit.segment()) break;
    const uint64_t end = e.segment == limit.segment() ? limit.offset() : UINT64_MAX;
    auto segment = seg::SegmentReader::open(dir / seg::segment_file_name(e.segment), e.segment, end,
                                            kFirstRead);
    if (!segment) {
      if (segment.error().sys_errno != ENOENT) return std::unexpected(segment.error());
      return make_error(Errc::released, "segment " + std::to_string(e.segment) +
                                            " was released while oldest() read it");
    }
    segment->set_keys(keys);
    const uint64_t avail = std::min<uint64_t>(e.end, segment->end());
    for (uint64_t off = e.begin; off < avail;) {
      auto d = segment->record(static_cast<uint32_t>(off));
      if (!d) return std::unexpected(d.error());
      if (d->status != seg::Decode::ok) {
        return make_error(Errc::corruption,
                          "record at " + Position(e.segment, off).to_string() +
                              " no longer validates: " + (d->reason ? d->reason : "zeroed"));
      }
      if (d->record.kind == seg::Kind::data) return Position(e.segment, off);
      if (d->record.kind == seg::Kind::batch) {
        return Position(e.segment, seg::first_entry(d->record));
      }
      if (d->record.kind == seg::Kind::first) {
        // A record in fragments is the oldest only if it is whole (a crash
        // may have cut it): the reader decides, as replay would.
        auto reader = log.read(Position(e.segment, off));
        if (!reader) return std::unexpected(reader.error());
        auto rec = reader->next();
        if (!rec) return std::unexpected(rec.error());
        return *rec ? std::optional<Position>((*rec)->position) : std::nullopt;
      }
      if (d->record.kind == seg::Kind::end) break;
      off += d->record.framed;
    }
  }
  return std::nullopt;
}

}  // namespace

const char* to_string(SegmentState state) noexcept {
  switch (state) {
    case SegmentState::spare:
      return "spare";
    case SegmentState::recycling:
      return "recycling";
    case SegmentState::active:
      return "active";
    case SegmentState::sealed:
      return "sealed";
    case SegmentState::releasable:
      return "releasable";
  }
  return "unknown";
}

uint64_t Log::disk_bytes() const {
  uint64_t sum = 0;
  for (const auto& f : impl_->manager->files()) sum += f.size;
  return sum;
}

Result<std::vector<SegmentInfo>> Log::segments() const {
  if (impl_->closed) return make_error(Errc::closed, "the log is closed");
  std::lock_guard lock(impl_->bounds_mu);
  std::vector<seg::FileInfo> files;
  Position durable;
  for (int attempt = 1;; ++attempt) {
    // Durable first: the reader's limit is then at or past it, so every
    // segment before it is read to its end.
    durable = impl_->driver->durable();
    files = impl_->manager->files();
    auto r = scan_bounds(*this, impl_->bounds, files, durable);
    if (r) break;
    if (r.error().code != Errc::released || attempt == kAttempts) return std::unexpected(r.error());
  }
  // Forget released segments (release_before may have missed one this
  // scan had not yet seen).
  std::erase_if(impl_->bounds, [&](const auto& kv) {
    return std::none_of(files.begin(), files.end(),
                        [&](const seg::FileInfo& f) { return is_log(f) && f.id == kv.first; });
  });
  uint64_t newest = 0;
  for (const auto& f : files) {
    if (is_log(f)) newest = std::max(newest, f.id);
  }
  const uint64_t first_of_session = impl_->appender->first_segment();
  std::vector<SegmentInfo> out;
  for (const auto& f : files) {
    SegmentInfo info;
    info.id = f.id;
    info.path = f.path;
    info.bytes = f.size;
    switch (f.role) {
      case seg::FileInfo::Role::spare:
        info.state = SegmentState::spare;
        break;
      case seg::FileInfo::Role::recycling:
        info.state = SegmentState::recycling;
        break;
      case seg::FileInfo::Role::log: {
        const auto& b = impl_->bounds[f.id];
        info.first = b.first;
        info.last = b.last;
        if (f.id == newest && first_of_session != seg::Appender::kNoSegment &&
            f.id >= first_of_session) {
          info.state = SegmentState::active;
        } else if (f.id < durable.segment()) {
          info.state = SegmentState::releasable;
        } else {
          info.state = SegmentState::sealed;
        }
        break;
      }
    }
    out.push_back(std::move(info));
  }
  return out;
}

Result<std::optional<Position>> Log::oldest() const {
  if (impl_->closed) return make_error(Errc::closed, "the log is closed");
  {
    // What segments() learnt answers without reading, if the oldest
    // segments it knows to be complete lead to a record.
    std::lock_guard lock(impl_->bounds_mu);
    for (uint64_t id : impl_->manager->segment_ids()) {
      auto it = impl_->bounds.find(id);
      if (it == impl_->bounds.end()) break;
      if (it->second.first) return it->second.first;
      if (!it->second.complete) break;
    }
  }
  for (int attempt = 1;; ++attempt) {
    // Durable first: every extent listed after it holds its records up to it.
    const Position durable = impl_->driver->durable();
    std::vector<seg::Extent> extents;
    {
      std::lock_guard lock(impl_->release_mu);
      extents = impl_->readable_extents();
    }
    auto first = first_record(*this, impl_->config.dir, extents, durable, impl_->keys.get());
    if (first || first.error().code != Errc::released || attempt == kAttempts) return first;
  }
}

}  // namespace synclog
