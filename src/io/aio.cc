#include "io/aio.h"

#include <libaio.h>
#include <sys/uio.h>  // RWF_DSYNC

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace synclog::io {

struct AioContext::State {
  io_context_t ctx = nullptr;
  unsigned depth = 0;
  unsigned in_flight = 0;
  // Scratch reused by every call: no allocation per sync.
  std::vector<iocb> iocbs;
  std::vector<iocb*> ptrs;
  std::vector<io_event> events;
  std::vector<AioCompletion> done;
};

AioContext::AioContext() = default;
AioContext::AioContext(AioContext&&) noexcept = default;
AioContext& AioContext::operator=(AioContext&&) noexcept = default;

AioContext::~AioContext() {
  if (s_ && s_->ctx) ::io_destroy(s_->ctx);
}

Result<AioContext> AioContext::create(unsigned depth) {
  auto s = std::make_unique<State>();
  // libaio returns -errno and leaves errno alone.
  if (int rc = ::io_setup(static_cast<int>(depth), &s->ctx); rc < 0) {
    return make_error(Errc::io_error,
                      "io_setup(" + std::to_string(depth) + "): " + std::strerror(-rc), -rc);
  }
  s->depth = depth;
  s->iocbs.resize(depth);
  s->ptrs.resize(depth);
  s->events.resize(depth);
  s->done.resize(depth);
  AioContext c;
  c.s_ = std::move(s);
  return c;
}

unsigned AioContext::depth() const { return s_ ? s_->depth : 0; }
unsigned AioContext::in_flight() const { return s_ ? s_->in_flight : 0; }

Result<size_t> AioContext::submit(std::span<const AioWrite> writes) {
  const size_t n = std::min<size_t>(writes.size(), s_->depth - s_->in_flight);
  if (n == 0) return 0;
  for (size_t i = 0; i < n; ++i) {
    const AioWrite& w = writes[i];
    iocb* cb = &s_->iocbs[i];
    ::io_prep_pwrite(cb, w.fd, const_cast<std::byte*>(w.buf), w.len,
                     static_cast<long long>(w.offset));
    cb->aio_rw_flags = w.dsync ? RWF_DSYNC : 0;
    cb->data = reinterpret_cast<void*>(static_cast<uintptr_t>(w.tag));
    s_->ptrs[i] = cb;
  }
  int rc = ::io_submit(s_->ctx, static_cast<long>(n), s_->ptrs.data());
  if (rc < 0)
    return make_error(Errc::io_error, std::string("io_submit: ") + std::strerror(-rc), -rc);
  s_->in_flight += static_cast<unsigned>(rc);
  return static_cast<size_t>(rc);
}

Result<std::span<const AioCompletion>> AioContext::reap(size_t min) {
  int rc;
  do {
    rc = ::io_getevents(s_->ctx, static_cast<long>(min), static_cast<long>(s_->in_flight),
                        s_->events.data(), nullptr);
  } while (rc == -EINTR);
  if (rc < 0)
    return make_error(Errc::io_error, std::string("io_getevents: ") + std::strerror(-rc), -rc);
  for (int i = 0; i < rc; ++i) {
    const io_event& e = s_->events[i];
    s_->done[i] = {static_cast<uint64_t>(reinterpret_cast<uintptr_t>(e.data)),
                   static_cast<int64_t>(static_cast<long>(e.res))};
  }
  s_->in_flight -= static_cast<unsigned>(rc);
  return std::span<const AioCompletion>(s_->done.data(), static_cast<size_t>(rc));
}

}  // namespace synclog::io
