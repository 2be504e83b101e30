#include "segments/segment_reader.h"

#include <algorithm>
#include <array>

#include "segments/batch.h"

namespace synclog::seg {

Result<SegmentReader> SegmentReader::open(const std::filesystem::path& path, uint64_t id,
                                          uint64_t limit, size_t window) {
  auto file = io::File::open(path, io::File::Mode::read);
  if (!file) return std::unexpected(file.error());
  auto size = file->size();
  if (!size) return std::unexpected(size.error());
  return SegmentReader(std::move(*file), id, *size, limit, std::max<size_t>(window, kAlign));
}

void SegmentReader::set_limit(uint64_t limit) {
  // Bytes held from before stay valid: they lay below the old limit, and
  // what is below a durable position does not change.
  limit_ = limit;
}

Result<void> SegmentReader::cover(uint64_t offset, size_t n) {
  const uint64_t held_end = base_ + buf_.size();
  if (offset >= base_ && offset <= held_end) {
    if (offset + n <= held_end || held_end >= end()) return {};
  }
  // A record larger than the window is read whole, with a window beyond
  // it, so that a scan stepping through it does not re-read for each step.
  const uint64_t want = n <= window_ ? window_ : n + window_;
  const uint64_t readable = offset < end() ? end() - offset : 0;
  buf_.resize(static_cast<size_t>(std::min(want, readable)));
  base_ = offset;
  if (buf_.empty()) return {};
  auto got = file_.read_at(offset, buf_);
  if (!got) {
    buf_.clear();
    return std::unexpected(got.error());
  }
  if (*got < buf_.size()) {
    // The file is shorter than it was at open: its end is where reads end.
    buf_.resize(*got);
    size_ = offset + *got;
  }
  return {};
}

Result<Decoded> SegmentReader::frame(uint32_t offset) {
  if (auto r = cover(offset, kRecordHeaderSize); !r) return std::unexpected(r.error());
  const uint64_t at = offset - base_;
  const auto header = std::span<const std::byte>(buf_).subspan(
      std::min<size_t>(at, buf_.size()),
      std::min<size_t>(kRecordHeaderSize, buf_.size() - std::min<size_t>(at, buf_.size())));
  if (auto r = cover(offset, claimed_framed_size(header)); !r) return std::unexpected(r.error());
  return decode_record(buf_, base_, id_, offset);
}

Result<Decoded> SegmentReader::record(uint32_t offset) {
  auto framed = frame(offset);
  if (!framed) return framed;
  Decoded d = *framed;
  if (d.status != Decode::ok || raw_) return d;
  if (d.record.flags == 0 && !carries_user_bytes(d.record.kind)) return d;
  // (The header is read apart from the window: `d` stays valid.)
  if (auto h = header(); !h) {
    // A plain record in a file whose header is unreadable: the header's
    // damage is reported where it is checked (recovery, synclog-dump).
    if (d.record.flags == 0 && h.error().code == Errc::bad_directory) return d;
    return std::unexpected(h.error());
  }
  if (d.record.flags == 0) {
    // The flags are outside what the GCM tag of the frame itself could
    // vouch for: an encrypted segment holds no plain user record, so a
    // plain one there was put in place of a sealed one (its checksum is
    // public), never written by the log.
    if (!header_->encrypted) return d;
    Decoded b{Decode::bad, {}, "plain user record in an encrypted segment"};
    b.damage = true;
    return b;
  }
  return untransform(d);
}

Result<SegmentHeader> SegmentReader::header() {
  if (header_) return *header_;
  std::array<std::byte, kHeaderSize> head{};
  auto got = file_.read_at(0, head);
  if (!got) return std::unexpected(got.error());
  auto h = decode_header(std::span<const std::byte>(head).first(*got));
  if (!h) {
    return make_error(h.error().code, "segment " + std::to_string(id_) + ": " + h.error().message);
  }
  header_ = *h;
  return *h;
}

Result<Decoded> SegmentReader::untransform(Decoded d) {
  auto bad = [](const char* why, bool damage) {
    Decoded b{Decode::bad, {}, why};
    b.damage = damage;
    return b;
  };
  // A writer older than version 6 never set a flag: like any flag on an
  // old segment, plain damage of the word.
  if (header_->version < kFirstTransformVersion) return bad("reserved record flags set", false);
  const RecordView r = d.record;
  std::span<const std::byte> bytes = r.payload;
  const uint32_t word = record_word(r.kind, static_cast<uint32_t>(bytes.size()), r.flags);
  if (r.flags & kEncryptedFlag) {
    if (!header_->encrypted) return bad("encrypted record in a segment without a key id", true);
    if (!keys_ && sealed_ok_) {
      d.record.sealed = true;
      return d;
    }
    if (!cipher_) {
      if (!keys_) {
        return make_error(Errc::invalid_config,
                          "segment " + std::to_string(id_) + " is encrypted under key id " +
                              std::to_string(header_->key_id) + " and no key source is configured");
      }
      auto c = keys_->cipher(header_->key_id, header_->log_id, id_, header_->salt,
                             key_check_of(*header_));
      if (!c) return std::unexpected(c.error());
      cipher_ = *c;
    }
    if (!decrypt(*cipher_, r.offset, word, bytes, &plain_)) {
      return bad("record fails authentication", true);
    }
    bytes = plain_;
  }
  const uint32_t code = (r.flags & kCompressionMask) >> kCompressionShift;
  if (code != 0) {
    // Only a record of at most half a segment is ever stored whole (larger
    // ones are fragments, never compressed): a hostile raw length costs no
    // more than that.
    const uint64_t max_raw = header_->segment_size / 2;
    if (const char* why = decompress(code, bytes, max_raw, &inflated_)) return bad(why, true);
    bytes = inflated_;
  }
  if (const char* why = check_plain(r.kind, static_cast<uint32_t>(bytes.size()))) {
    return bad(why, true);
  }
  d.record.payload = bytes;
  if (r.kind == Kind::batch) {
    if (const char* why = check_batch(bytes)) return bad(why, true);
    d.record.packed = code != 0;
    if (d.record.packed && !packed_fits(r.payload.size(), batch_count(d.record))) {
      return bad("compressed batch record shorter than 8 bytes per record", true);
    }
  }
  return d;
}

Result<std::span<const std::byte>> SegmentReader::bytes(uint64_t offset, size_t n) {
  if (auto r = cover(offset, n); !r) return std::unexpected(r.error());
  const uint64_t at = offset - base_;
  if (at >= buf_.size()) return std::span<const std::byte>();
  return std::span<const std::byte>(buf_).subspan(static_cast<size_t>(at),
                                                  std::min<size_t>(n, buf_.size() - at));
}

Result<std::optional<uint32_t>> start_of(SegmentReader& segment, uint64_t begin, uint64_t at) {
  if (at < begin || at % kAlign != 0 || at + kRecordHeaderSize > segment.end()) {
    return std::nullopt;
  }
  const auto here = static_cast<uint32_t>(at);
  auto d = segment.record(here);
  if (!d) return std::unexpected(d.error());
  if (d->status == Decode::ok) return here;
  auto head = segment.bytes(at, kEntryHeader);
  if (!head) return std::unexpected(head.error());
  // (The entry header of an encrypted or compressed batch is not in the
  // clear: such a position is found by the caller's walk instead, unless
  // the bytes there happen to lead to the batch holding it.)
  const auto batch = batch_from_entry(*head, here);
  if (!batch || *batch < begin) return std::nullopt;
  auto b = segment.record(*batch);
  if (!b) return std::unexpected(b.error());
  if (b->status == Decode::ok && b->record.kind == Kind::batch && is_entry(b->record, here)) {
    return *batch;
  }
  return std::nullopt;
}

}  // namespace synclog::seg
