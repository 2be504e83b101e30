#include "segments/appender.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "io/clock.h"
#include "segments/batch.h"
#include "segments/fragments.h"
#include "segments/inflight.h"

namespace synclog::seg {
namespace {

// The pieces' bytes [from, from + n), as pieces.
void slice(std::span<const std::span<const std::byte>> pieces, uint64_t from, uint64_t n,
           std::vector<std::span<const std::byte>>* out) {
  for (const auto& piece : pieces) {
    if (n == 0) break;
    if (from >= piece.size()) {
      from -= piece.size();
      continue;
    }
    const uint64_t take = std::min<uint64_t>(piece.size() - from, n);
    out->push_back(piece.subspan(from, take));
    n -= take;
    from = 0;
  }
}

}  // namespace

Appender::Appender(SegmentManager& manager, std::chrono::milliseconds allocation_timeout,
                   metrics::Metrics& metrics, uint64_t max_whole, RecordTransform transform)
    : manager_(manager),
      allocation_timeout_(allocation_timeout),
      max_whole_(max_whole),
      transform_(transform),
      metrics_(metrics) {
  // Far past its capacity, and far from wrapping however many writers add.
  placeholder_.reserved.store(uint64_t{1} << 62);
  active_.store(&placeholder_);
}

void Appender::start(Position previous_end) { previous_end_ = previous_end; }

void Appender::begin_session(Segment& first) {
  const uint64_t off = first.reserved.fetch_add(framed_size(kPositionPayload));
  encode_position_record(first.image(), first.id(), static_cast<uint32_t>(off), Kind::session,
                         previous_end_);
  first_segment_.store(first.id(), std::memory_order_release);
}

Result<Position> Appender::append_position(Kind kind, Position value) {
  std::byte payload[kPositionPayload];
  const uint64_t raw = value.raw();
  std::memcpy(payload, &raw, sizeof raw);
  return append(kind, payload);
}

Result<Position> Appender::append(Kind kind, std::span<const std::byte> payload) {
  const std::span<const std::byte> one[1] = {payload};
  return append_gathered(kind, one);
}

bool Appender::frame(Segment& seg, uint64_t off, Kind kind, uint32_t flags,
                     std::span<const std::span<const std::byte>> body, uint64_t stored_len) {
  const auto at = static_cast<uint32_t>(off);
  if ((flags & kEncryptedFlag) == 0) {
    encode_gathered(seg.image(), seg.id(), at, kind, body, flags);
    return true;
  }
  // Encrypted straight into the image: the position is part of the nonce
  // and the associated data, so this happens only after the reservation.
  const uint32_t word = record_word(kind, static_cast<uint32_t>(stored_len), flags);
  std::byte* payload = seg.image().data() + off + kRecordHeaderSize;
  if (seg.cipher() && encrypt(*seg.cipher(), at, word, body, payload)) {
    seal_record(seg.image(), seg.id(), at, word);
    return true;
  }
  // The reserved bytes must still hold a record: a marker naming 0:0
  // (below anything durable), whose zero padding fills the frame.
  const uint32_t filler = framed_size(static_cast<uint32_t>(stored_len)) - kRecordHeaderSize;
  std::memset(payload, 0, filler);
  seal_record(seg.image(), seg.id(), at, record_word(Kind::sync, filler, 0));
  return false;
}

Result<Position> Appender::append_gathered(Kind kind,
                                           std::span<const std::span<const std::byte>> pieces,
                                           const Placed* placed, Position* settled,
                                           Stored* stored) {
  uint64_t len = 0;
  for (const auto& piece : pieces) len += piece.size();
  if (kind == Kind::data && len > max_whole_) {
    return append_fragmented(pieces, len, placed, settled, stored);
  }
  // Compressed before the reservation (its size must be known), on this
  // writer's thread; encrypted after it, into the image.
  const bool user = kind == Kind::data || kind == Kind::batch;
  uint32_t flags = 0;
  uint64_t stored_len = len;
  auto body = pieces;
  std::span<const std::byte> squeezed_piece[1];
  if (user && transform_.compression != Compression::none && len > 0) {
    thread_local std::vector<std::byte> squeezed;
    const size_t n = compress(transform_.compression, transform_.level, pieces, len, &squeezed);
    bool use = n != 0;
    if (use && kind == Kind::batch) {
      uint32_t count = 0;
      std::memcpy(&count, pieces.front().data(), sizeof count);
      use = packed_fits(n + (transform_.encrypt ? kTagSize : 0), count);
    }
    if (use) {
      flags |= (transform_.compression == Compression::lz4 ? kCompressionLz4 : kCompressionZstd)
               << kCompressionShift;
      squeezed_piece[0] = std::span<const std::byte>(squeezed.data(), n);
      body = squeezed_piece;
      stored_len = n;
    }
  }
  if (user && transform_.encrypt) {
    flags |= kEncryptedFlag;
    stored_len += kTagSize;
  }
  if (stored) *stored = Stored{stored_len, kind == Kind::batch && (flags & kCompressionMask)};
  inflight::Slot* slot = &inflight_.mine();
  const uint64_t size = framed_size(static_cast<uint32_t>(stored_len));
  std::optional<SpaceWait> wait;
  for (;;) {
    inflight::begin(*slot);
    Segment* seg = active_.load(std::memory_order_acquire);
    const uint64_t off = seg->reserved.fetch_add(size);
    if (off + size <= seg->capacity()) {
      if (!frame(*seg, off, kind, flags, body, stored_len)) {
        inflight::end(*slot);
        return make_error(Errc::failed, "libcrypto failed to encrypt a record (nothing appended)");
      }
      const Position at(seg->id(), off);
      if (settled) *settled = at;
      if (placed) placed->fn(placed->context, at, at);
      inflight::end(*slot);
      return at;
    }
    on_overflow(seg, off);
    inflight::end(*slot);
    // Waiting for a segment happens outside the inflight window, so a sync
    // never waits on a writer that waits on space. One deadline for all
    // retries: waiting behind other writers counts against it.
    if (!wait)
      wait = SpaceWait{std::chrono::steady_clock::now(), io::deadline_after(allocation_timeout_)};
    if (auto r = advance_from(seg, *wait); !r) return std::unexpected(r.error());
  }
}

void Appender::on_overflow(Segment* seg, uint64_t off) {
  if (off <= seg->capacity()) {
    // This writer crossed the end: it closes the segment for replay.
    encode_record(seg->image(), seg->id(), static_cast<uint32_t>(off), Kind::end, {});
    seg->sealed_end.store(off + kRecordHeaderSize, std::memory_order_release);
  }
}

Result<Position> Appender::append_marker(Position durable, uint32_t align, uint64_t* padding) {
  constexpr uint64_t kPlain = framed_size(kMarkerPayload);
  *padding = 0;
  align = std::max(align, kAlign);
  inflight::Slot* slot = &inflight_.mine();
  std::byte payload[4096 + kMarkerPayload] = {};
  const uint64_t raw = durable.raw();
  std::memcpy(payload, &raw, sizeof raw);
  for (;;) {
    inflight::begin(*slot);
    Segment* seg = active_.load(std::memory_order_acquire);
    if (seg == &placeholder_) {
      // Nothing appended yet: a sync must not be what starts the session.
      inflight::end(*slot);
      return make_error(Errc::closed, "no segment taken yet: nothing to sync");
    }
    // The size depends on where the marker lands, so this reservation is a
    // compare-exchange where appends use fetch_add.
    uint64_t at = seg->reserved.load();
    while (at <= seg->capacity()) {
      const uint64_t end = (at + kPlain + align - 1) / align * align;
      if (end > seg->capacity()) break;
      if (seg->reserved.compare_exchange_weak(at, end)) {
        const uint64_t len = end - at - kRecordHeaderSize;
        // Read once the marker is reserved: every record before it was
        // reserved earlier, so none was appended after this time (restore
        // to a time relies on it; docs/durability.md).
        const uint64_t wall = io::wall_now_ns();
        std::memcpy(payload + kPositionPayload, &wall, sizeof wall);
        encode_record(seg->image(), seg->id(), static_cast<uint32_t>(at), Kind::sync,
                      std::span<const std::byte>(payload, len));
        inflight::end(*slot);
        *padding = len - kMarkerPayload;
        return Position(seg->id(), end);
      }
    }
    // No room for a padded marker: close this segment and try the next.
    on_overflow(seg, seg->reserved.fetch_add(seg->size()));
    inflight::end(*slot);
    // The syncer never waits for space: it syncs what exists instead.
    const auto now = std::chrono::steady_clock::now();
    if (auto r = advance_from(seg, SpaceWait{now, now}); !r) {
      return std::unexpected(r.error());
    }
  }
}

Result<void> Appender::advance_from(Segment* full, const SpaceWait& wait) {
  // One thread switches; the others wait for it only until their own
  // deadline (the syncer's is now: it never waits behind a starved switch).
  const uint64_t start = io::now_ns();
  auto moved_on = [&] { return active_.load(std::memory_order_acquire) != full; };
  {
    std::unique_lock lock(mu_);
    if (!switch_done_.wait_until(lock, wait.deadline, [&] { return !switching_ || moved_on(); })) {
      return std::unexpected(behind_another(wait));
    }
    if (moved_on()) return {};
    if (sealed_) return make_error(Errc::closed, "the log is closed");
    switching_ = true;
  }
  // The writer that wrote the end record may still be on its way here; the
  // switch below only needs the segment to be full, which it is.
  auto next = take_next(wait);
  metrics_.local().record(metrics::Hist::allocation_wait, io::now_ns() - start);
  std::lock_guard lock(mu_);
  switching_ = false;
  if (next) {
    if (full == &placeholder_) begin_session(**next);
    live_.push_back(*next);
    active_.store(*next, std::memory_order_release);
  }
  switch_done_.notify_all();
  if (!next) return std::unexpected(next.error());
  return {};
}

Error Appender::behind_another(const SpaceWait& wait) {
  const std::string why = manager_.spare_problem();
  return no_segment(wait, "another append is waiting for one (" +
                              (why.empty() ? "the next spare is still being made" : why) + ")");
}

Result<void> Appender::claim_switch(const SpaceWait& wait) {
  std::unique_lock lock(mu_);
  if (!switch_done_.wait_until(lock, wait.deadline, [&] { return !switching_; })) {
    return std::unexpected(behind_another(wait));
  }
  if (sealed_) return make_error(Errc::closed, "the log is closed");
  switching_ = true;
  return {};
}

Result<Segment*> Appender::take_next(const SpaceWait& wait) {
  if (!stash_.empty()) {
    Segment* s = stash_.front();
    stash_.pop_front();
    return s;
  }
  return manager_.take(wait);
}

Result<Position> Appender::append_fragmented(std::span<const std::span<const std::byte>> pieces,
                                             uint64_t len, const Placed* placed, Position* settled,
                                             Stored* stored) {
  const uint32_t overhead = transform_.encrypt ? kTagSize : 0;
  const uint32_t flags = transform_.encrypt ? kEncryptedFlag : 0;
  // The record starts in a fresh segment and its fragments follow each
  // other with nothing between but end records, so this writer is the one
  // switching segments until its last segment is active. No sync target
  // (head()) then falls inside the record: before the switch it is in the
  // segment closed here, after it past the record. Every segment is taken
  // first, outside the inflight window: a sync never waits on a writer
  // that waits for space.
  const SpaceWait wait{std::chrono::steady_clock::now(), io::deadline_after(allocation_timeout_)};
  const uint64_t start_ns = io::now_ns();
  if (auto r = claim_switch(wait); !r) return std::unexpected(r.error());
  std::vector<Segment*> taken;
  auto give_back = [&] {
    std::lock_guard lock(mu_);
    // Unused ones keep their place in id order: the next switch takes them.
    stash_.insert(stash_.begin(), taken.begin(), taken.end());
    switching_ = false;
    switch_done_.notify_all();
  };
  Segment* cur = active_.load(std::memory_order_acquire);
  const bool session = cur == &placeholder_;
  FragmentPlan plan;
  for (uint32_t need = 1; taken.size() < need;) {
    auto next = take_next(wait);
    if (!next) {
      give_back();
      return std::unexpected(next.error());
    }
    taken.push_back(*next);
    if (taken.size() == 1) {
      const uint64_t start = kHeaderSize + (session ? framed_size(kPositionPayload) : 0);
      plan = plan_fragments(len, start, taken.front()->capacity(), overhead);
      need = plan.segments;
    }
  }
  metrics_.local().record(metrics::Hist::allocation_wait, io::now_ns() - start_ns);

  inflight::Slot* slot = &inflight_.mine();
  inflight::begin(*slot);
  if (session) {
    begin_session(*taken.front());
  } else {
    // Closed as seal() closes it; a writer that crossed the end first wrote
    // the end record.
    on_overflow(cur, cur->reserved.fetch_add(cur->size()));
  }
  std::byte total[kFirstFixedPayload];
  std::memcpy(total, &len, sizeof total);
  std::vector<std::span<const std::byte>> parts;
  bool sealed = true;
  uint64_t stored_bytes = 0;
  for (const Fragment& f : plan.fragments) {
    parts.clear();
    if (f.kind == Kind::first) parts.push_back(total);
    slice(pieces, f.from, f.bytes, &parts);
    Segment* s = taken[f.segment];
    sealed &= frame(*s, f.offset, f.kind, flags, parts, f.payload() + overhead);
    stored_bytes += f.payload() + overhead;
  }
  if (stored) *stored = Stored{stored_bytes, false};
  for (const FragmentPlan::End& e : plan.ends) {
    Segment* s = taken[e.segment];
    encode_record(s->image(), s->id(), e.offset, Kind::end, {});
    s->sealed_end.store(e.offset + kRecordHeaderSize, std::memory_order_release);
    s->reserved.store(s->size());
  }
  taken.back()->reserved.store(plan.last_end);
  const Position at(taken[plan.fragments.front().segment]->id(), plan.fragments.front().offset);
  const Position end(taken.back()->id(), plan.fragments.back().offset);
  if (settled) *settled = end;
  if (placed && sealed) placed->fn(placed->context, at, end);
  {
    // Made active inside the window: a sync that targets the new head
    // drains this writer first, so it never syncs a segment half-written.
    std::lock_guard lock(mu_);
    for (Segment* s : taken) live_.push_back(s);
    active_.store(taken.back(), std::memory_order_release);
  }
  inflight::end(*slot);
  taken.clear();
  give_back();
  // A fragment that failed to encrypt is a marker now: readers abandon the
  // chain there, as after a crash inside it.
  if (!sealed) {
    return make_error(Errc::failed, "libcrypto failed to encrypt a record (nothing appended)");
  }
  return at;
}

Position Appender::head() const {
  Segment* seg = active_.load(std::memory_order_acquire);
  if (seg == &placeholder_) return previous_end_;
  const uint64_t reserved = seg->reserved.load();
  return Position(seg->id(), std::min(reserved, seg->capacity()));
}

void Appender::drain() const { inflight_.drain(); }

Result<Position> Appender::seal() {
  std::unique_lock lock(mu_);
  switch_done_.wait(lock, [&] { return !switching_; });
  Segment* seg = active_.load(std::memory_order_acquire);
  sealed_ = true;
  if (seg == &placeholder_) return previous_end_;
  // Push the reservation past the end so that later appends overflow; the
  // overflow path then finds the log sealed.
  const uint64_t off = seg->reserved.fetch_add(seg->size());
  inflight_.drain();
  if (off > seg->capacity()) {
    // A writer crossed the end just before us and wrote the end record; its
    // switch is blocked on our lock and will see sealed_.
    const uint64_t end = seg->sealed_end.load(std::memory_order_acquire);
    return Position(seg->id(), end);
  }
  encode_record(seg->image(), seg->id(), static_cast<uint32_t>(off), Kind::end, {});
  seg->sealed_end.store(off + kRecordHeaderSize, std::memory_order_release);
  return Position(seg->id(), off + kRecordHeaderSize);
}

std::vector<Segment*> Appender::segments_from(uint64_t from) const {
  std::lock_guard lock(mu_);
  std::vector<Segment*> out;
  for (Segment* s : live_) {
    if (s->id() >= from) out.push_back(s);
  }
  return out;
}

std::vector<Segment*> Appender::forget_before(uint64_t id) {
  std::lock_guard lock(mu_);
  std::vector<Segment*> out;
  while (live_.size() > 1 && live_.front()->id() < id) {
    out.push_back(live_.front());
    live_.pop_front();
  }
  return out;
}

}  // namespace synclog::seg
