// Log::append_async(), wait_durable() and durable_fd(): appends whose thread
// does not wait, and the ways to learn that they became durable.
#include "log/log_impl.h"

namespace synclog {

Result<Position> Log::append_async(std::span<const std::byte> record, Completion done) {
  if (auto r = impl_->admit(record); !r) return std::unexpected(r.error());
  auto pos = impl_->appender->append(seg::Kind::data, record);
  if (!pos) return pos;
  if (impl_->config.metrics) {
    metrics::Shard& shard = impl_->metrics.local();
    shard.add(metrics::Count::appends, 1);
    shard.add(metrics::Count::bytes, record.size());
  }
  // Registered before the sync is asked for, so it cannot be missed.
  const bool called_back = static_cast<bool>(done);
  if (called_back) impl_->completions->add(*pos, std::move(done));
  // The record is in the log now. If the log fails meanwhile (periodic
  // mode, waiting for a lagging syncer), the callback carries the error; a
  // caller without one learns it here.
  if (auto r = impl_->driver->after_async_append(*pos); !r && !called_back) {
    return std::unexpected(r.error());
  }
  return pos;
}

Result<void> Log::wait_durable(Position pos, std::chrono::nanoseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
  return impl_->driver->wait_until(pos, deadline);
}

Result<int> Log::durable_fd() { return impl_->driver->notify_fd(); }

}  // namespace synclog
