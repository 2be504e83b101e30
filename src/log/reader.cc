#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "io/clock.h"
#include "io/file.h"
#include "log/log_impl.h"
#include "segments/batch.h"
#include "segments/format.h"
#include "segments/segment_reader.h"

namespace synclog {

struct __attribute__((visibility("hidden"))) Reader::Impl {
  std::filesystem::path dir;
  std::vector<seg::Extent> extents;
  Position from;
  bool from_is_boundary = false;  // `from` is the end of a record this reader returned
  Position limit;                 // durable() when the reader was made or last extended
  size_t index = 0;
  bool in_extent = false;
  std::optional<seg::SegmentReader> segment;
  uint64_t off = 0;
  // The batch record whose inner records are being returned (its payload
  // stays valid: the segment is not read again until they are all out),
  // and the entry of the next one.
  std::optional<seg::RecordView> batch;
  std::optional<seg::InnerRecord> inner;  // the next one to return
  // Decrypts encrypted segments (null without a key source); shared with
  // the log, which the reader may outlive.
  std::shared_ptr<seg::Keyring> keys;
  // The bytes of the fragmented record last returned.
  std::vector<std::byte> whole;

  // Reads on from the first fragment `first` of a record, which lies in
  // extents[index]. Sets `end` past its last fragment when it is whole;
  // when it was abandoned (a record other than its next fragment follows:
  // the append failed, or recovery ended the log inside it), `end` is
  // where that record is.
  enum class Chain { whole, abandoned, later };
  Result<Chain> assemble(size_t index, const seg::RecordView& first, Position* end);

  Result<void> open_segment(uint64_t id);
  // Where to start in extent `e`: its first record, or `from` itself when
  // that is where a record of the extent starts (or the batch holding the
  // record at `from`).
  Result<uint64_t> start_in(const seg::Extent& e);
  Result<std::optional<Record>> next();
  // Moves the end to `new_limit` (for tailing): reads on from just after
  // the last record returned.
  void extend(Position new_limit, std::vector<seg::Extent> new_extents);
};

Reader::Reader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Reader::Reader(Reader&&) noexcept = default;
Reader& Reader::operator=(Reader&&) noexcept = default;
Reader::~Reader() = default;

Result<std::optional<Record>> Reader::next() { return impl_->next(); }

Result<void> Reader::Impl::open_segment(uint64_t id) {
  const uint64_t end = id == limit.segment() ? limit.offset() : UINT64_MAX;
  if (segment && segment->id() == id) {
    segment->set_limit(end);
    return {};
  }
  segment.reset();
  auto r = seg::SegmentReader::open(dir / seg::segment_file_name(id), id, end);
  if (r) r->set_keys(keys.get());
  if (!r) {
    if (r.error().sys_errno == ENOENT) {
      return make_error(Errc::released,
                        "segment " + std::to_string(id) + " was released while a reader needed it");
    }
    return std::unexpected(r.error());
  }
  segment = std::move(*r);
  return {};
}

Result<uint64_t> Reader::Impl::start_in(const seg::Extent& e) {
  if (e.segment != from.segment() || from.offset() <= e.begin) return e.begin;
  if (from_is_boundary) return std::max<uint64_t>(e.begin, from.offset());
  // A position from append(), append_batch() or a Record is where a record
  // starts, or an inner record of a batch: start there (at its batch) without
  // reading the segment before it. Any other position is found by walking
  // from the extent's first record.
  if (from.offset() >= e.end) return e.begin;
  auto start = seg::start_of(*segment, e.begin, from.offset());
  if (!start) return std::unexpected(start.error());
  return start->value_or(e.begin);
}

Result<Reader::Impl::Chain> Reader::Impl::assemble(size_t index, const seg::RecordView& first,
                                                   Position* end) {
  uint64_t total = 0;
  std::memcpy(&total, first.payload.data(), sizeof total);
  whole.assign(first.payload.begin() + seg::kFirstFixedPayload, first.payload.end());
  uint64_t id = extents[index].segment;
  const Position start(id, first.offset);
  uint64_t off = first.offset + first.framed;
  std::optional<seg::SegmentReader> other;
  seg::SegmentReader* in = &*segment;
  for (;;) {
    const Position here(id, off);
    *end = here;
    // Durable so far only up to here: the rest is read once it is.
    if (here >= limit) return Chain::later;
    if (off >= std::min<uint64_t>(extents[index].end, in->end())) return Chain::abandoned;
    auto decoded = in->record(static_cast<uint32_t>(off));
    if (!decoded) return std::unexpected(decoded.error());
    const seg::Decoded& d = *decoded;
    if (d.status != seg::Decode::ok) {
      return make_error(Errc::corruption,
                        "record at " + here.to_string() +
                            " no longer validates: " + (d.reason ? d.reason : "zeroed"));
    }
    const seg::Kind kind = d.record.kind;
    if (kind == seg::Kind::end) {
      // The next fragment starts the next segment, if the log goes on there.
      if (index + 1 >= extents.size() || extents[index + 1].segment != id + 1 ||
          extents[index + 1].begin != seg::kHeaderSize) {
        return Chain::abandoned;
      }
      ++index;
      ++id;
      off = seg::kHeaderSize;
      if (Position(id, off) >= limit) {
        *end = here;
        return Chain::later;
      }
      const uint64_t cap = id == limit.segment() ? limit.offset() : UINT64_MAX;
      auto r = seg::SegmentReader::open(dir / seg::segment_file_name(id), id, cap);
      if (r) r->set_keys(keys.get());
      if (!r) {
        if (r.error().sys_errno == ENOENT) {
          return make_error(Errc::released, "segment " + std::to_string(id) +
                                                " was released while a reader needed it");
        }
        return std::unexpected(r.error());
      }
      other = std::move(*r);
      in = &*other;
      continue;
    }
    if (kind != seg::Kind::middle && kind != seg::Kind::last) return Chain::abandoned;
    whole.insert(whole.end(), d.record.payload.begin(), d.record.payload.end());
    if (whole.size() > total || (kind == seg::Kind::last && whole.size() != total)) {
      return make_error(Errc::corruption, "fragmented record at " + start.to_string() + " holds " +
                                              std::to_string(whole.size()) +
                                              " bytes where its first fragment says " +
                                              std::to_string(total));
    }
    off += d.record.framed;
    if (kind == seg::Kind::last) {
      *end = Position(id, off);
      return Chain::whole;
    }
  }
}

Result<std::optional<Record>> Reader::Impl::next() {
  while (index < extents.size()) {
    const seg::Extent& e = extents[index];
    if (e.segment > limit.segment()) break;
    if (e.segment < from.segment()) {
      ++index;
      continue;
    }
    if (!in_extent) {
      if (auto r = open_segment(e.segment); !r) return std::unexpected(r.error());
      auto start = start_in(e);
      if (!start) return std::unexpected(start.error());
      off = *start;
      in_extent = true;
    }
    if (batch) {
      if (!inner) {
        batch.reset();
        continue;
      }
      const seg::InnerRecord here = *inner;
      inner = seg::next_inner(*batch, here);
      const Position at(e.segment, here.offset);
      if (at < from) continue;
      // After the batch's last record the next read starts past the batch
      // (off); inside it, at the next record, which start_in finds again.
      const bool last = !inner;
      from = Position(e.segment, last ? off : inner->offset);
      from_is_boundary = last;
      return Record{at, here.data};
    }
    const uint64_t end = std::min<uint64_t>(e.end, segment->end());
    if (off >= end) {
      in_extent = false;
      ++index;
      continue;
    }
    if (e.segment == from.segment() && off < from.offset()) {
      // Records wholly before `from` are stepped over on their checksums:
      // the walk to a record inside an encrypted or compressed batch (whose
      // entry header does not lead back to it) decrypts and decompresses
      // nothing before it. None of them is returned.
      auto f = segment->frame(static_cast<uint32_t>(off));
      if (!f) return std::unexpected(f.error());
      if (f->status == seg::Decode::ok && f->record.kind != seg::Kind::end &&
          off + f->record.framed <= from.offset()) {
        off += f->record.framed;
        continue;
      }
    }
    auto decoded = segment->record(static_cast<uint32_t>(off));
    if (!decoded) return std::unexpected(decoded.error());
    const seg::Decoded& d = *decoded;
    if (d.status != seg::Decode::ok) {
      // The reader reads the file it opened; if it was released (and
      // recycled into a later segment) since, the bytes are another
      // segment's now.
      const uint64_t id = e.segment;
      segment.reset();
      if (auto r = open_segment(id); !r) return std::unexpected(r.error());
      return make_error(Errc::corruption,
                        "record at " + Position(e.segment, off).to_string() +
                            " no longer validates: " + (d.reason ? d.reason : "zeroed"));
    }
    const Position at(e.segment, off);
    off += d.record.framed;
    if (d.record.kind == seg::Kind::end) off = end;
    if (d.record.kind == seg::Kind::batch) {
      batch = d.record;
      inner = seg::first_inner(*batch);
      continue;
    }
    if (d.record.kind == seg::Kind::data && at >= from) {
      from = Position(e.segment, off);
      from_is_boundary = true;
      return Record{at, d.record.payload};
    }
    // Fragments other than a first one are passed over: their first one
    // was released, or left out as damage.
    if (d.record.kind == seg::Kind::first && at >= from) {
      Position end;
      auto chain = assemble(index, d.record, &end);
      if (!chain) return std::unexpected(chain.error());
      if (*chain == Chain::later) {
        off = at.offset();
        return std::optional<Record>();
      }
      // Go on past it (whole) or at what follows its last fragment written
      // (abandoned); extents before `end` are passed over.
      from = end;
      from_is_boundary = true;
      in_extent = false;
      if (*chain == Chain::whole) return Record{at, whole};
    }
  }
  return std::optional<Record>();
}

void Reader::Impl::extend(Position new_limit, std::vector<seg::Extent> new_extents) {
  limit = new_limit;
  extents = std::move(new_extents);
  index = 0;
  in_extent = false;
  batch.reset();
}

struct __attribute__((visibility("hidden"))) Tailer::Impl {
  const Log::Impl* log;
  Reader::Impl reader;
};

Tailer::Tailer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tailer::Tailer(Tailer&&) noexcept = default;
Tailer& Tailer::operator=(Tailer&&) noexcept = default;
Tailer::~Tailer() = default;

Result<std::optional<Record>> Tailer::next(std::chrono::milliseconds timeout) {
  const auto deadline = io::deadline_after(timeout);
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    auto rec = impl_->reader.next();
    if (!rec || *rec) return rec;
    // At the end of what was durable: poll for more. Polling keeps the
    // append path free of any tailer bookkeeping; the pause grows to 2 ms.
    const Position durable = impl_->log->driver->durable();
    if (durable > impl_->reader.limit) {
      std::lock_guard lock(impl_->log->release_mu);
      impl_->reader.extend(durable, impl_->log->readable_extents());
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::optional<Record>();
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(2));
  }
}

Result<Tailer> Log::tail(Position from) const {
  auto impl = std::make_unique<Tailer::Impl>();
  impl->log = impl_.get();
  impl->reader.dir = impl_->config.dir;
  impl->reader.keys = impl_->keys;
  impl->reader.from = from;
  impl->reader.limit = impl_->driver->durable();
  {
    std::lock_guard lock(impl_->release_mu);
    if (auto r = impl_->check_not_released(from); !r) return std::unexpected(r.error());
    impl->reader.extents = impl_->readable_extents();
  }
  return Tailer(std::move(impl));
}

Result<Reader> Log::read(Position from) const {
  auto impl = std::make_unique<Reader::Impl>();
  impl->dir = impl_->config.dir;
  impl->keys = impl_->keys;
  impl->from = from;
  impl->limit = impl_->driver->durable();
  {
    std::lock_guard lock(impl_->release_mu);
    if (auto r = impl_->check_not_released(from); !r) return std::unexpected(r.error());
    impl->extents = impl_->readable_extents();
  }
  return Reader(std::move(impl));
}

}  // namespace synclog
