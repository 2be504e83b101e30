// Log::append over pieces (gather input) and Log::append_batch. Kept apart
// from log.cc's single-record append; both end in the same appender call and
// the same wait for durability.
#include "segments/batch.h"

#include <string>

#include "io/clock.h"
#include "log/log_impl.h"

namespace synclog {
namespace {

std::unexpected<Error> too_large(const Config& config, const std::string& what, uint64_t bytes) {
  return make_error(Errc::invalid_argument,
                    what + " of " + std::to_string(bytes) + " bytes exceeds the maximum of " +
                        std::to_string(config.max_record_size()) +
                        " (Config::max_record_size(): half of segment_size " +
                        std::to_string(config.segment_size) + " less 64, at most 16MiB-1)");
}

// The same refusals as Log::append, in the same order.
Result<void> refuse_if_stopped(const Log::Impl& impl) {
  if (impl.closing.load(std::memory_order_relaxed)) {
    return make_error(Errc::closed, "the log is closed");
  }
  if (impl.driver->failed()) {
    auto f = impl.driver->failure();
    return make_error(Errc::failed, "the log stopped after a failed sync: " + f->message,
                      f->sys_errno);
  }
  return {};
}

// Writes one framed record from `pieces` and waits as append() does;
// `records` and `bytes` are what the metrics count.
Result<Position> write_and_wait(Log::Impl& impl, seg::Kind kind,
                                std::span<const std::span<const std::byte>> pieces,
                                uint64_t records, uint64_t bytes) {
  if (auto r = refuse_if_stopped(impl); !r) return std::unexpected(r.error());
  if (!impl.config.metrics) {
    auto pos = impl.appender->append_gathered(kind, pieces);
    if (!pos) return pos;
    if (auto r = impl.driver->after_append(*pos); !r) return std::unexpected(r.error());
    return pos;
  }
  metrics::Shard& shard = impl.metrics.local();
  const bool waits = impl.config.mode != SyncMode::periodic;
  const bool timed = waits || shard.sample();
  const uint64_t start = timed ? io::now_ns() : 0;
  auto pos = impl.appender->append_gathered(kind, pieces);
  if (!pos) return pos;
  const uint64_t written = waits ? io::now_ns() : 0;
  auto r = impl.driver->after_append(*pos);
  if (timed) {
    const uint64_t end = io::now_ns();
    shard.record(metrics::Hist::append, end - start);
    if (waits) shard.record(metrics::Hist::durable_wait, end - written);
  }
  shard.add(metrics::Count::appends, records);
  shard.add(metrics::Count::bytes, bytes);
  if (!r) return std::unexpected(r.error());
  return pos;
}

}  // namespace

Result<Position> Log::append(std::span<const std::span<const std::byte>> pieces) {
  uint64_t total = 0;
  for (const auto& piece : pieces) total += piece.size();
  if (total == 0) {
    return make_error(Errc::invalid_argument,
                      "empty record: its " + std::to_string(pieces.size()) +
                          " piece(s) hold no byte (records hold 1 byte or more)");
  }
  if (total > impl_->config.max_record_size()) return too_large(impl_->config, "record", total);
  return write_and_wait(*impl_, seg::Kind::data, pieces, 1, total);
}

Result<std::vector<Position>> Log::append_batch(
    std::span<const std::span<const std::byte>> records) {
  if (records.empty()) {
    return make_error(Errc::invalid_argument, "empty batch: a batch holds 1 record or more");
  }
  uint64_t bytes = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].empty()) {
      return make_error(Errc::invalid_argument, "record " + std::to_string(i) +
                                                    " of the batch of " +
                                                    std::to_string(records.size()) +
                                                    " is empty (records hold 1 byte or more)");
    }
    bytes += records[i].size();
  }
  const std::string what = "batch of " + std::to_string(records.size()) + " records";
  // Refused before the layout is built: a batch far over the limit must
  // not allocate entry headers first.
  if (bytes > impl_->config.max_record_size()) return too_large(impl_->config, what, bytes);
  const seg::BatchLayout layout(records);
  if (layout.payload_size() > impl_->config.max_record_size()) {
    return too_large(impl_->config, what + " (" + std::to_string(bytes) + " bytes of data) encoded",
                     layout.payload_size());
  }
  auto at = write_and_wait(*impl_, seg::Kind::batch, layout.pieces(), records.size(), bytes);
  if (!at) return std::unexpected(at.error());
  std::vector<Position> out;
  out.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    out.emplace_back(at->segment(), at->offset() + layout.entry_offset(i));
  }
  return out;
}

Result<std::vector<Position>> Log::append_batch(std::span<const std::string_view> records) {
  std::vector<std::span<const std::byte>> spans;
  spans.reserve(records.size());
  for (std::string_view r : records) spans.push_back(std::as_bytes(std::span(r.data(), r.size())));
  return append_batch(spans);
}

}  // namespace synclog
