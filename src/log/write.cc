// The one write path behind every append call: the refusals, the appender,
// the wait (or, for an asynchronous append, the completion) and the metrics.
#include <string>

#include "io/clock.h"
#include "log/log_impl.h"

namespace synclog {

Result<void> Log::Impl::admit(uint64_t bytes, const std::string& what, bool whole) const {
  // 0 bytes is a record too (format version 4): engines log markers and
  // empty transactions, and its 8-byte header tells it from an unwritten slot.
  // A batch is one data record, never fragmented: its limit is that of one.
  const uint64_t max = whole ? config.max_unfragmented_size() : config.max_record_size();
  if (bytes > max) {
    const std::string tag =
        config.encryption != Encryption::none ? ", less the 16-byte tag of encryption" : "";
    const std::string why =
        whole ? "Config::max_unfragmented_size(): a batch is one record, at most half of "
                "segment_size " +
                    std::to_string(config.segment_size) + " less 64 and 16MiB-1" + tag
        : config.max_record != 0
            ? "config key max_record"
            : "Config::max_record_size(): half of segment_size " +
                  std::to_string(config.segment_size) + " less 64, at most 16MiB-1" + tag +
                  "; set max_record for larger ones";
    return make_error(Errc::invalid_argument, what + " of " + std::to_string(bytes) +
                                                  " bytes exceeds the maximum of " +
                                                  std::to_string(max) + " (" + why + ")");
  }
  if (closing.load(std::memory_order_relaxed)) {
    return make_error(Errc::closed, "the log is closed");
  }
  if (driver->failed()) return driver->failed_error();
  return {};
}

Result<Position> Log::Impl::write(const Write& w) {
  // An asynchronous append's callback is registered while the record is in
  // flight: the sync that covers the record waits for the registration, so
  // the completion thread never sees a later record durable before an
  // earlier record's callback exists (position order), nor misses one.
  // A batch's callback is keyed by its first record: durable() only ever
  // stops between records, so it passes both or neither.
  struct Ctx {
    Completions* completions;
    Completion* done;
    uint32_t shown;
  } ctx{completions.get(), w.done, w.shown};
  const seg::Appender::Placed placed{
      [](void* c, Position at, Position settled) {
        auto* x = static_cast<Ctx*>(c);
        x->completions->add(Position(settled.segment(), settled.offset() + x->shown),
                            Position(at.segment(), at.offset() + x->shown), std::move(*x->done));
      },
      &ctx};
  const bool called_back = w.done && *w.done;
  const seg::Appender::Placed* hook = called_back ? &placed : nullptr;
  if (called_back) completions->start();

  const bool waits = !w.async && config.mode != SyncMode::periodic;
  metrics::Shard* shard = config.metrics ? &metrics.local() : nullptr;
  const bool timed = shard && (waits || shard->sample());
  const uint64_t start = timed ? io::now_ns() : 0;
  Position settled;
  seg::Appender::Stored stored;
  auto pos = appender->append_gathered(w.kind, w.pieces, hook, &settled, &stored);
  if (!pos) return pos;
  if (w.packed) *w.packed = stored.packed;
  const uint64_t written = timed && waits ? io::now_ns() : 0;
  // A fragmented record is durable once its last fragment is.
  auto r = w.async ? driver->after_async_append(settled) : driver->after_append(settled);
  if (timed) {
    const uint64_t end = io::now_ns();
    shard->record(metrics::Hist::append, end - start);
    if (waits) shard->record(metrics::Hist::durable_wait, end - written);
  }
  if (shard) {
    shard->add(metrics::Count::appends, w.records);
    shard->add(metrics::Count::bytes, w.bytes);
    shard->add(metrics::Count::stored_bytes, stored.bytes);
  }
  // The record is in the log now. If the log failed meanwhile (periodic
  // mode, waiting for a lagging syncer), a callback carries the error; a
  // caller without one learns it here.
  if (!r && !called_back) return std::unexpected(r.error());
  return pos;
}

}  // namespace synclog
