// examples/epoll_loop as a child process (EPOLL_LOOP_BIN): it must exit 0
// having acknowledged every record, its "acked N" lines must only grow, and
// a replay of its log must hold every acknowledged record, byte for byte, in
// order. Once run to the end, once SIGKILLed part-way (the acknowledged
// prefix must still replay).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "pipe_lines.h"
#include "test_util.h"

namespace synclog::test {
namespace {

// What examples/epoll_loop/main.cc appends as record i.
std::string expected_record(uint64_t i) {
  std::string r = "record " + std::to_string(i);
  r.resize(100, '.');
  return r;
}

class Child {
 public:
  explicit Child(const std::vector<std::string>& args) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) std::abort();
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::dup2(out[1], 1);
      ::execv(EPOLL_LOOP_BIN, argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    from_ = out[0];
  }
  ~Child() {
    if (pid_ > 0) kill();
    ::close(from_);
  }
  // The next line of output; nullopt at end of output or after 60 s.
  std::optional<std::string> line() { return lines_.next(from_, 60'000); }
  void kill() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  int wait_exit() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  int from_ = -1;
  PipeLines lines_;
};

// Checks that the first `acked` replayed records are the example's records
// 0..acked-1, and that nothing beyond what it appended (`at_most`) is there.
void expect_replay(const Config& cfg, uint64_t acked, uint64_t at_most) {
  auto got = replay_all(cfg);
  ASSERT_TRUE(got.has_value()) << got.error().describe();
  ASSERT_GE(got->size(), acked) << "an acknowledged record is missing";
  ASSERT_LE(got->size(), at_most);
  for (size_t i = 0; i < got->size(); ++i)
    ASSERT_EQ((*got)[i].data, expected_record(i)) << "record " << i;
}

struct Progress {
  uint64_t last_acked = 0;
  std::optional<uint64_t> done;
};

// Reads "acked N" lines (N must grow) until `stop_at` or "done N".
void follow(Child& child, uint64_t stop_at, Progress* p) {
  while (p->last_acked < stop_at) {
    auto l = child.line();
    ASSERT_TRUE(l.has_value()) << "epoll_loop stopped after acked " << p->last_acked;
    if (l->starts_with("done ")) {
      p->done = std::stoull(l->substr(5));
      return;
    }
    ASSERT_TRUE(l->starts_with("acked ")) << *l;
    const uint64_t n = std::stoull(l->substr(6));
    ASSERT_GT(n, p->last_acked) << "acknowledgements must only grow";
    p->last_acked = n;
  }
}

Config loop_config(const TempDir& dir) {
  Config c = small_config(dir.path() / "log");
  c.segment_size = 128 << 10;  // several segment switches under the loop
  return c;
}

bool backend_unsupported(std::string* why) {
  TempDir probe;
  auto log = Log::open(small_config(probe.path()));
  if (!log && log.error().code == Errc::unsupported) {
    *why = log.error().describe();
    return true;
  }
  return false;
}

TEST(EpollLoop, AcknowledgesEveryRecordAndTheLogReplaysThem) {
  if (std::string why; backend_unsupported(&why)) GTEST_SKIP() << why;
  TempDir dir;
  const Config cfg = loop_config(dir);
  const uint64_t records = scaled(5000);
  Child child({"epoll_loop", cfg.dir.string(), std::to_string(records), "32", cfg.to_string()});
  Progress p;
  ASSERT_NO_FATAL_FAILURE(follow(child, records, &p));
  if (!p.done) {
    auto l = child.line();
    ASSERT_TRUE(l && l->starts_with("done ")) << l.value_or("(no output)");
    p.done = std::stoull(l->substr(5));
  }
  EXPECT_EQ(child.wait_exit(), 0);
  EXPECT_EQ(p.last_acked, records);
  EXPECT_EQ(*p.done, records);
  ASSERT_NO_FATAL_FAILURE(expect_replay(cfg, records, records));
}

TEST(EpollLoop, AcknowledgedRecordsSurviveSigkill) {
  if (std::string why; backend_unsupported(&why)) GTEST_SKIP() << why;
  TempDir dir(disk_base());
  const Config cfg = loop_config(dir);
  const uint64_t records = 1'000'000;  // far more than it gets to before the kill
  const uint64_t window = 64;
  Child child({"epoll_loop", cfg.dir.string(), std::to_string(records), std::to_string(window),
               cfg.to_string()});
  Progress p;
  ASSERT_NO_FATAL_FAILURE(follow(child, scaled(3000), &p));
  ASSERT_FALSE(p.done) << "finished before the kill";
  child.kill();
  // It ran on between our last read and the kill, so only the lower bound
  // is known.
  ASSERT_NO_FATAL_FAILURE(expect_replay(cfg, p.last_acked, records));
}

}  // namespace
}  // namespace synclog::test
