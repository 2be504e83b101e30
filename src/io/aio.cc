#include "io/aio.h"

#include <libaio.h>
#include <sys/uio.h>  // RWF_DSYNC
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "io/hook.h"

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
  // Only while a test hook is installed: what after() needs once a write
  // completes, and writes the hook failed (they count as in flight).
  struct Traced {
    uint64_t tag;
    const std::filesystem::path* path;
    const std::byte* data;
    uint64_t offset;
  };
  std::vector<Traced> traced;
  std::vector<AioCompletion> injected;
};

namespace {

const std::filesystem::path kNoPath;

// io_destroy waits for an RCU grace period (~30 ms measured), which would
// make every log close, and every reopen in a test loop, that slow. Idle
// contexts are kept for the next create(). They belong to the address space:
// a child after fork() has none of its parent's, hence the pid.
struct Idle {
  io_context_t ctx;
  unsigned depth;
  pid_t pid;
};
constexpr size_t kMaxIdle = 4;
std::mutex g_idle_mu;
std::vector<Idle>& idle() {
  static auto* v = new std::vector<Idle>;  // never destroyed: contexts may close during exit
  return *v;
}

io_context_t take_idle(unsigned depth) {
  const pid_t pid = ::getpid();
  std::lock_guard lock(g_idle_mu);
  std::erase_if(idle(), [&](const Idle& i) { return i.pid != pid; });
  for (auto it = idle().begin(); it != idle().end(); ++it) {
    if (it->depth != depth) continue;
    io_context_t ctx = it->ctx;
    idle().erase(it);
    return ctx;
  }
  return nullptr;
}

}  // namespace

AioContext::AioContext() = default;
AioContext::AioContext(AioContext&&) noexcept = default;
AioContext& AioContext::operator=(AioContext&&) noexcept = default;

AioContext::~AioContext() {
  if (!s_ || !s_->ctx) return;
  if (s_->in_flight == 0) {  // a context with writes in flight is never reused
    std::lock_guard lock(g_idle_mu);
    if (idle().size() < kMaxIdle) {
      idle().push_back({s_->ctx, s_->depth, ::getpid()});
      return;
    }
  }
  ::io_destroy(s_->ctx);
}

Result<AioContext> AioContext::create(unsigned depth) {
  auto s = std::make_unique<State>();
  s->ctx = take_idle(depth);
  // libaio returns -errno and leaves errno alone.
  if (int rc = s->ctx ? 0 : ::io_setup(static_cast<int>(depth), &s->ctx); rc < 0) {
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
  if (!s_->ctx) return make_error(Errc::io_error, "aio context destroyed after an earlier error");
  size_t n = std::min<size_t>(writes.size(), s_->depth - s_->in_flight);
  Hook* hook = current_hook();
  const size_t traced = s_->traced.size();
  int injected = 0;
  for (size_t i = 0; i < n; ++i) {
    const AioWrite& w = writes[i];
    if (hook != nullptr) {
      const Event e{Op::direct_write, w.path ? *w.path : kNoPath, w.offset, w.len, w.buf};
      if ((injected = hook->before(e)) != 0) {
        n = i;  // the kernel gets the writes before it; this one only "completes"
        break;
      }
      s_->traced.push_back({w.tag, w.path, w.buf, w.offset});
    }
    iocb* cb = &s_->iocbs[i];
    ::io_prep_pwrite(cb, w.fd, const_cast<std::byte*>(w.buf), w.len,
                     static_cast<long long>(w.offset));
    cb->aio_rw_flags = w.dsync ? RWF_DSYNC : 0;
    cb->data = reinterpret_cast<void*>(static_cast<uintptr_t>(w.tag));
    s_->ptrs[i] = cb;
  }
  int rc = n == 0 ? 0 : ::io_submit(s_->ctx, static_cast<long>(n), s_->ptrs.data());
  // Writes the kernel did not take will be offered again.
  if (s_->traced.size() > traced + std::max(rc, 0)) s_->traced.resize(traced + std::max(rc, 0));
  if (rc < 0) {
    return make_error(Errc::io_error, std::string("io_submit: ") + std::strerror(-rc), -rc);
  }
  s_->in_flight += static_cast<unsigned>(rc);
  if (injected != 0 && static_cast<size_t>(rc) == n) {
    s_->injected.push_back({writes[n].tag, -injected});
    ++s_->in_flight;
    ++rc;
  }
  return static_cast<size_t>(rc);
}

void AioContext::settle() {
  while (s_->ctx && s_->in_flight > 0) {
    if (reap(1)) continue;
    ::io_destroy(s_->ctx);
    s_->ctx = nullptr;
    s_->in_flight = 0;
    s_->injected.clear();
    s_->traced.clear();
  }
}

Result<std::span<const AioCompletion>> AioContext::reap(size_t min) {
  if (!s_->ctx) return make_error(Errc::io_error, "aio context destroyed after an earlier error");
  // Injected failures are complete already.
  const size_t got = s_->injected.size();
  std::copy(s_->injected.begin(), s_->injected.end(), s_->done.begin());
  s_->injected.clear();
  s_->in_flight -= static_cast<unsigned>(got);
  int rc = 0;
  if (got < min) {
    do {
      rc = ::io_getevents(s_->ctx, static_cast<long>(min - got), static_cast<long>(s_->in_flight),
                          s_->events.data(), nullptr);
    } while (rc == -EINTR);
  }
  if (rc < 0) {
    return make_error(Errc::io_error, std::string("io_getevents: ") + std::strerror(-rc), -rc);
  }
  for (int i = 0; i < rc; ++i) {
    const io_event& e = s_->events[i];
    AioCompletion& c = s_->done[got + static_cast<size_t>(i)];
    c = {static_cast<uint64_t>(reinterpret_cast<uintptr_t>(e.data)),
         static_cast<int64_t>(static_cast<long>(e.res))};
    auto t = std::find_if(s_->traced.begin(), s_->traced.end(),
                          [&](const State::Traced& x) { return x.tag == c.tag; });
    if (t == s_->traced.end()) continue;
    Hook* hook = current_hook();
    if (hook != nullptr && c.res >= 0) {
      const Event e{Op::direct_write, t->path ? *t->path : kNoPath, t->offset,
                    static_cast<uint64_t>(c.res), t->data};
      c.res = std::clamp<int64_t>(hook->written(e, c.res), 0, c.res);
      hook->after(Event{Op::direct_write, t->path ? *t->path : kNoPath, t->offset,
                        static_cast<uint64_t>(c.res), t->data});
    }
    s_->traced.erase(t);
  }
  s_->in_flight -= static_cast<unsigned>(rc);
  return std::span<const AioCompletion>(s_->done.data(), got + static_cast<size_t>(rc));
}

}  // namespace synclog::io
