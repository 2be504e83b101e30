#include "signal_storm.h"

#include <dirent.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace synclog::test {
namespace {

std::atomic<uint64_t> g_delivered{0};

void on_signal(int) { g_delivered.fetch_add(1, std::memory_order_relaxed); }

void install_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: interrupted calls return early
  ::sigaction(SIGURG, &sa, nullptr);
}

std::vector<pid_t> other_threads(pid_t self) {
  std::vector<pid_t> tids;
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return tids;
  while (dirent* e = ::readdir(d)) {
    const pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
    if (tid > 0 && tid != self) tids.push_back(tid);
  }
  ::closedir(d);
  return tids;
}

}  // namespace

SignalStorm::SignalStorm(std::chrono::microseconds period) : period_(period) {
  install_handler();
  thread_ = std::thread([this] { run(); });
}

SignalStorm::~SignalStorm() {
  stop_.store(true);
  thread_.join();
  // The handler stays: a signal sent just before the join may still be
  // pending on some thread, and the default action of SIGURG is to ignore it.
}

void SignalStorm::run() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGURG);
  ::pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  const pid_t pid = ::getpid();
  const pid_t self = static_cast<pid_t>(::syscall(SYS_gettid));
  std::vector<pid_t> tids;
  auto scanned = std::chrono::steady_clock::time_point{};
  while (!stop_.load(std::memory_order_relaxed)) {
    const auto now = std::chrono::steady_clock::now();
    // Threads come and go (spare creation, io_uring workers are not ours to
    // signal but appear here too): rescan every 2 ms.
    if (now - scanned > std::chrono::milliseconds(2)) {
      tids = other_threads(self);
      scanned = now;
    }
    for (pid_t tid : tids) {
      if (::syscall(SYS_tgkill, pid, tid, SIGURG) == 0)
        sent_.fetch_add(1, std::memory_order_relaxed);
    }
    timespec ts{0, static_cast<long>(period_.count() * 1000)};
    while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
}

std::unique_ptr<SignalStorm> SignalStorm::from_env() {
  const char* env = std::getenv("SYNCLOG_TEST_SIGNAL_HZ");
  const long hz = env != nullptr ? std::strtol(env, nullptr, 10) : 0;
  if (hz <= 0) return nullptr;
  return std::make_unique<SignalStorm>(std::chrono::microseconds(std::max(1L, 1000000 / hz)));
}

SignalShelter::SignalShelter() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGURG);
  ::pthread_sigmask(SIG_BLOCK, &mask, nullptr);
}

SignalShelter::~SignalShelter() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGURG);
  ::pthread_sigmask(SIG_UNBLOCK, &mask, nullptr);
}

uint64_t SignalStorm::delivered() { return g_delivered.load(std::memory_order_relaxed); }

std::string storm_summary(const SignalStorm* storm) {
  if (storm == nullptr) return "";
  return ", signal storm: " + std::to_string(storm->sent()) + " signals sent, " +
         std::to_string(SignalStorm::delivered()) + " handled";
}

}  // namespace synclog::test
