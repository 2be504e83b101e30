// Log::append_async(), wait_durable() and durable_fd(): appends whose thread
// does not wait, and the ways to learn that they became durable.
#include "io/clock.h"
#include "log/log_impl.h"

namespace synclog {

Result<Position> Log::append_async(std::span<const std::byte> record, Completion done) {
  if (auto r = impl_->admit(record.size(), "record"); !r) return std::unexpected(r.error());
  const std::span<const std::byte> one[1] = {record};
  return impl_->write({.pieces = one, .bytes = record.size(), .async = true, .done = &done});
}

Result<void> Log::wait_durable(Position pos, std::chrono::nanoseconds timeout) {
  const auto deadline = io::deadline_after(timeout);
  return impl_->driver->wait_until(pos, deadline);
}

Result<int> Log::durable_fd() { return impl_->driver->notify_fd(); }

}  // namespace synclog
