#include "segments/segment_reader.h"

#include <algorithm>

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

Result<Decoded> SegmentReader::record(uint32_t offset) {
  if (auto r = cover(offset, kRecordHeaderSize); !r) return std::unexpected(r.error());
  const uint64_t at = offset - base_;
  const auto header = std::span<const std::byte>(buf_).subspan(
      std::min<size_t>(at, buf_.size()),
      std::min<size_t>(kRecordHeaderSize, buf_.size() - std::min<size_t>(at, buf_.size())));
  if (auto r = cover(offset, claimed_framed_size(header)); !r) return std::unexpected(r.error());
  return decode_record(buf_, base_, id_, offset);
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
