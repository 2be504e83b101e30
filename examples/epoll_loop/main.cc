// epoll_loop: one thread drives the log from an epoll loop, the way a
// network server would: no completion callbacks, no thread of its own.
//
//   epoll_loop DIR [RECORDS [WINDOW [CONFIG]]]
//
// Keeps WINDOW (default 64) append_async() calls outstanding until RECORDS
// (default 10000) records are appended, and "acknowledges" each one once
// durable() has passed it, as a server would answer its client. Record i is
// "record <i>" padded with dots to 100 bytes, so a replay can check it.
// Each wake-up that acknowledged something prints "acked N" (the total so
// far); at the end "done N". Exits 0 only if every record was acknowledged,
// 1 on any error (a failed append, the log failing or closing under us).
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>

#include "synclog/log.h"

namespace {

std::string record(uint64_t i) {
  std::string r = "record " + std::to_string(i);
  r.resize(100, '.');
  return r;
}

int fail(const char* what, const std::string& why) {
  std::fprintf(stderr, "epoll_loop: %s: %s\n", what, why.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 5) {
    std::fprintf(stderr, "usage: %s DIR [RECORDS [WINDOW [CONFIG]]]\n", argv[0]);
    return 2;
  }
  const uint64_t records = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 10'000;
  const uint64_t window = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 64;
  if (window == 0) return fail("usage", "WINDOW must be at least 1");
  synclog::Config config;
  if (argc > 4) {
    auto parsed = synclog::Config::parse(argv[4]);
    if (!parsed) return fail("config", parsed.error().describe());
    config = *parsed;
  }
  config.dir = argv[1];
  config.create_dir = true;
  auto opened = synclog::Log::open(config);
  if (!opened) return fail("open", opened.error().describe());
  synclog::Log& log = **opened;

  auto durable_fd = log.durable_fd();
  if (!durable_fd) return fail("durable_fd", durable_fd.error().describe());
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return fail("epoll_create1", std::strerror(errno));
  epoll_event want{};
  want.events = EPOLLIN;
  want.data.fd = *durable_fd;
  if (::epoll_ctl(ep, EPOLL_CTL_ADD, *durable_fd, &want) != 0)
    return fail("epoll_ctl", std::strerror(errno));

  // Positions ascend in append order and durable() only grows, so the
  // requests still waiting are always a suffix: a queue is enough.
  std::deque<synclog::Position> pending;
  uint64_t appended = 0, acked = 0;
  int status = 0;
  while (acked < records) {
    while (appended < records && pending.size() < window) {
      auto pos = log.append_async(record(appended));
      if (!pos) {
        status = fail("append_async", pos.error().describe());
        break;
      }
      pending.push_back(*pos);
      ++appended;
    }
    if (status != 0) break;

    epoll_event got{};
    const int n = ::epoll_wait(ep, &got, 1, 10'000);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = fail("epoll_wait", std::strerror(errno));
      break;
    }
    if (n == 0) {
      status = fail("epoll_wait", "no progress in 10 s");
      break;
    }
    // Re-arm before looking at durable(): an advance after this read wakes
    // us again instead of being missed.
    uint64_t count = 0;
    if (::read(*durable_fd, &count, sizeof count) < 0 && errno != EAGAIN) {
      status = fail("read durable_fd", std::strerror(errno));
      break;
    }
    const synclog::Position durable = log.durable();
    const uint64_t before = acked;
    while (!pending.empty() && pending.front() < durable) {
      pending.pop_front();
      ++acked;
    }
    if (acked > before) {
      std::printf("acked %llu\n", static_cast<unsigned long long>(acked));
      std::fflush(stdout);
      continue;
    }
    // The fd also fires when the log fails or closes; a probe tells that
    // apart from a wake-up that simply brought nothing new.
    if (!pending.empty()) {
      if (auto w = log.wait_durable(pending.front(), std::chrono::nanoseconds(0));
          !w && w.error().code != synclog::Errc::timeout) {
        status = fail("log", w.error().describe());
        break;
      }
    }
  }
  ::close(ep);
  if (auto r = log.close(); !r && status == 0) status = fail("close", r.error().describe());
  std::printf("done %llu\n", static_cast<unsigned long long>(acked));
  return status;
}
