// Log::append over pieces (gather input) and the write batches: blocking
// (append_batch) and asynchronous (append_batch_async).
#include "segments/batch.h"

#include <string>

#include "log/log_impl.h"

namespace synclog {
namespace {

// Checks a batch, lays it out and writes it; the positions of its records.
Result<std::vector<Position>> write_batch(Log::Impl& impl,
                                          std::span<const std::span<const std::byte>> records,
                                          bool async, Log::Completion* done) {
  if (records.empty()) {
    return make_error(Errc::invalid_argument, "empty batch: a batch holds 1 record or more");
  }
  // Empty records are fine: each gets an entry, so a position, of its own.
  uint64_t bytes = 0;
  for (const auto& r : records) bytes += r.size();
  const std::string what = "batch of " + std::to_string(records.size()) + " records";
  // Refused before the layout is built: a batch far over the limit must
  // not allocate entry headers first.
  if (auto r = impl.admit(bytes, what, true); !r) return std::unexpected(r.error());
  const seg::BatchLayout layout(records);
  if (auto r = impl.admit(layout.payload_size(),
                          what + " (" + std::to_string(bytes) + " bytes of data) encoded", true);
      !r) {
    return std::unexpected(r.error());
  }
  bool packed = false;
  auto at = impl.write({.kind = seg::Kind::batch,
                        .pieces = layout.pieces(),
                        .records = records.size(),
                        .bytes = bytes,
                        .async = async,
                        .done = done,
                        .shown = layout.entry_offset(0),
                        .packed = &packed});
  if (!at) return std::unexpected(at.error());
  std::vector<Position> out;
  out.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    // A compressed batch's records are 8 bytes apart (batch.h): the first
    // is where it would be in a plain batch, so `shown` holds for both.
    const uint64_t rel = packed ? layout.entry_offset(0) + seg::kAlign * i : layout.entry_offset(i);
    out.emplace_back(at->segment(), at->offset() + rel);
  }
  return out;
}

std::vector<std::span<const std::byte>> as_spans(std::span<const std::string_view> records) {
  std::vector<std::span<const std::byte>> spans;
  spans.reserve(records.size());
  for (std::string_view r : records) spans.push_back(std::as_bytes(std::span(r.data(), r.size())));
  return spans;
}

}  // namespace

Result<Position> Log::append(std::span<const std::span<const std::byte>> pieces) {
  uint64_t total = 0;
  for (const auto& piece : pieces) total += piece.size();
  if (auto r = impl_->admit(total, "record"); !r) return std::unexpected(r.error());
  return impl_->write({.pieces = pieces, .bytes = total});
}

Result<std::vector<Position>> Log::append_batch(
    std::span<const std::span<const std::byte>> records) {
  return write_batch(*impl_, records, false, nullptr);
}

Result<std::vector<Position>> Log::append_batch(std::span<const std::string_view> records) {
  return append_batch(as_spans(records));
}

Result<std::vector<Position>> Log::append_batch_async(
    std::span<const std::span<const std::byte>> records, Completion done) {
  return write_batch(*impl_, records, true, &done);
}

Result<std::vector<Position>> Log::append_batch_async(std::span<const std::string_view> records,
                                                      Completion done) {
  return append_batch_async(as_spans(records), std::move(done));
}

}  // namespace synclog
