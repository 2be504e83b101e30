#include "segments/batch.h"

#include <cstring>

namespace synclog::seg {
namespace {

uint32_t load32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void store32(std::byte* p, uint32_t v) { std::memcpy(p, &v, sizeof v); }

constexpr std::byte kZeros[kAlign] = {};

}  // namespace

BatchLayout::BatchLayout(std::span<const std::span<const std::byte>> records) {
  heads_.resize(kBatchHeader + kEntryHeader * records.size());
  store32(heads_.data(), static_cast<uint32_t>(records.size()));
  store32(heads_.data() + 4, 0);
  pieces_.reserve(1 + 3 * records.size());
  pieces_.emplace_back(heads_.data(), kBatchHeader);
  uint64_t at = kRecordHeaderSize + kBatchHeader;  // from the batch record's header
  for (size_t i = 0; i < records.size(); ++i) {
    std::byte* head = heads_.data() + kBatchHeader + kEntryHeader * i;
    // Offsets past 32 bits only arise in batches far over any limit, which
    // the caller refuses before encoding.
    offsets_.push_back(static_cast<uint32_t>(at));
    store32(head, static_cast<uint32_t>(records[i].size()));
    store32(head + 4, static_cast<uint32_t>(at));
    pieces_.emplace_back(head, kEntryHeader);
    pieces_.push_back(records[i]);
    const uint64_t pad = batch_entry_size(records[i].size()) - kEntryHeader - records[i].size();
    if (pad > 0) pieces_.emplace_back(kZeros, pad);
    at += batch_entry_size(records[i].size());
  }
  size_ = at - kRecordHeaderSize;
}

const char* check_batch(std::span<const std::byte> payload) {
  if (payload.size() < kBatchMinPayload) return "batch record too short";
  const uint32_t count = load32(payload.data());
  if (count == 0) return "empty batch record";
  if (load32(payload.data() + 4) != 0) return "reserved batch field set";
  uint64_t at = kBatchHeader;  // in the payload
  for (uint32_t i = 0; i < count; ++i) {
    if (at + kEntryHeader > payload.size()) return "batch record shorter than its count";
    const uint32_t len = load32(payload.data() + at);
    const uint32_t back = load32(payload.data() + at + 4);
    if (back != at + kRecordHeaderSize) return "batch entry names another batch";
    at += batch_entry_size(len);
    if (at > payload.size()) return "batch entry runs past the batch";
  }
  if (at != payload.size()) return "batch record longer than its entries";
  return nullptr;
}

uint32_t batch_count(const RecordView& batch) {
  return batch.payload.size() >= kBatchHeader ? load32(batch.payload.data()) : 0;
}

std::optional<InnerRecord> inner_at(const RecordView& batch, uint32_t at) {
  const uint64_t rel = uint64_t{at} - batch.offset - kRecordHeaderSize;  // in the payload
  if (at < first_entry(batch) || rel + kEntryHeader > batch.payload.size()) return std::nullopt;
  const uint32_t len = load32(batch.payload.data() + rel);
  return InnerRecord{at, static_cast<uint32_t>(batch_entry_size(len)),
                     batch.payload.subspan(rel + kEntryHeader, len), static_cast<uint32_t>(rel)};
}

std::optional<InnerRecord> first_inner(const RecordView& batch) {
  if (!batch.packed) return inner_at(batch, first_entry(batch));
  if (batch.payload.size() < kBatchHeader + kEntryHeader || batch_count(batch) == 0) {
    return std::nullopt;
  }
  const uint32_t len = load32(batch.payload.data() + kBatchHeader);
  return InnerRecord{first_entry(batch), kAlign,
                     batch.payload.subspan(kBatchHeader + kEntryHeader, len), kBatchHeader};
}

std::optional<InnerRecord> next_inner(const RecordView& batch, const InnerRecord& r) {
  if (!batch.packed) return inner_at(batch, r.offset + r.framed);
  const uint64_t rel = r.rel + batch_entry_size(r.data.size());
  if (rel + kEntryHeader > batch.payload.size()) return std::nullopt;
  const uint32_t len = load32(batch.payload.data() + rel);
  return InnerRecord{r.offset + kAlign, kAlign, batch.payload.subspan(rel + kEntryHeader, len),
                     static_cast<uint32_t>(rel)};
}

uint32_t last_entry(const RecordView& batch) {
  if (batch.packed) return first_entry(batch) + kAlign * (batch_count(batch) - 1);
  uint32_t last = first_entry(batch);
  for (auto r = inner_at(batch, last); r; r = inner_at(batch, r->offset + r->framed)) {
    last = r->offset;
  }
  return last;
}

bool is_entry(const RecordView& batch, uint32_t at) {
  if (batch.packed) {
    const uint32_t first = first_entry(batch);
    return at >= first && (at - first) % kAlign == 0 && (at - first) / kAlign < batch_count(batch);
  }
  for (auto r = inner_at(batch, first_entry(batch)); r;
       r = inner_at(batch, r->offset + r->framed)) {
    if (r->offset == at) return true;
    if (r->offset > at) break;
  }
  return false;
}

std::optional<uint32_t> batch_from_entry(std::span<const std::byte> entry_header, uint32_t at) {
  if (entry_header.size() < kEntryHeader || at % kAlign != 0) return std::nullopt;
  const uint32_t back = load32(entry_header.data() + 4);
  if (back < kRecordHeaderSize + kBatchHeader || back > at || back % kAlign != 0) {
    return std::nullopt;
  }
  return at - back;
}

}  // namespace synclog::seg
