// G1/G2 under a real process crash: a child process appends in batch mode
// from several threads and reports every acknowledged append over a pipe;
// the parent SIGKILLs it at a random moment, reopens the log with the
// default recovery and checks that
//   - every acknowledged record replays, intact, at the position append()
//     returned (G1);
//   - replay is a prefix of each thread's append order: per thread the
//     sequence numbers are consecutive, the last one at most one past the
//     last acknowledgement (only one append per thread was in flight) (G2);
//   - what an earlier recovery replayed replays again, unchanged, apart
//     from a prefix that a release_before() may have dropped: recovery after
//     recovery never drops, resurrects or reorders records (G2, G3).
// Rounds alternate between a directory under the build tree (a real disk)
// and one under /dev/shm; each directory keeps its log across rounds. The
// child also calls release_before() (a target handed down by the parent and
// a rolling one), so kills land during releases and recycling too. A third
// of the rounds append flat out, the rest pause between appends (then syncs
// overlap appends instead of segment allocation being the bottleneck), and
// every fourth round per directory kills within a few ms of the fork, often
// inside Log::open.
//
// What a kill -9 can catch depends on the segment kind: with mmap segments
// (msync, msync-pool) every completed record is in the page cache and
// survives the process, so an append acknowledged before its sync is lost
// only where a torn record ends replay before it; with private images
// (pwrite, uring, aio) it is lost outright. The crash simulation covers
// power loss.
//
// $SYNCLOG_KILL9_SEED and $SYNCLOG_KILL9_ROUNDS override the fixed seed and
// the round count (e.g. for a soak run); $SYNCLOG_KILL9_VERBOSE prints each
// round.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "signal_storm.h"
#include "test_util.h"

namespace synclog::test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kAppenders = 4;
constexpr uint32_t kOpened = 0xffffffffu;   // Msg.thread: the child opened the log
constexpr uint32_t kRelease = 0xfffffffeu;  // Msg.thread: release_before(raw) is about to run
// Thread ids are round * kThreadStride + t, so every round's records differ.
constexpr uint32_t kThreadStride = 16;

// One acknowledgement. 24 bytes: one write() of it is atomic (< PIPE_BUF).
struct Msg {
  uint64_t raw = 0;
  uint64_t seq = 0;
  uint32_t thread = 0;
  uint32_t size = 0;
};
static_assert(sizeof(Msg) == 24 && sizeof(Msg) <= PIPE_BUF);

struct Ident {
  uint32_t thread = 0;
  uint64_t seq = 0;
  uint32_t size = 0;
  bool operator==(const Ident&) const = default;
};

std::string describe(const Ident& id) {
  return "(thread " + std::to_string(id.thread) + ", seq " + std::to_string(id.seq) + ", " +
         std::to_string(id.size) + " bytes)";
}

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 0) : fallback;
}

// Record sizes vary with (thread, seq): 16 bytes (the identity) to ~3 KiB.
uint32_t record_size(uint32_t thread, uint64_t seq) {
  uint64_t x = (uint64_t{thread} * 0x9e3779b97f4a7c15ull) ^ (seq * 0xbf58476d1ce4e5b9ull);
  x ^= x >> 31;
  return 16 + static_cast<uint32_t>(x % 3000);
}

// Threads a process may have before fork(): the main thread, and under
// ThreadSanitizer its background thread (TSan itself refuses a fork() with
// more: it counts only user threads).
constexpr size_t max_threads = kThreadSanitized ? 2 : 1;

// Names of this process's threads, not counting io_uring's kernel workers.
std::vector<std::string> user_threads() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::FILE* f = std::fopen((e.path() / "comm").c_str(), "r");
    if (!f) continue;  // gone since the listing
    char comm[64] = {};
    const bool read = std::fgets(comm, sizeof comm, f) != nullptr;
    std::fclose(f);
    if (!read) continue;
    std::string name(comm);
    while (!name.empty() && name.back() == '\n') name.pop_back();
    if (!name.starts_with("iou-")) names.push_back(e.path().filename().string() + ":" + name);
  }
  return names;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// ---------------------------------------------------------------- child ---

void send(int fd, const Msg& m) {
  // A failed write means the parent is gone: nothing left to report to.
  // (Under a signal storm a write can be cut short before it wrote anything.)
  ssize_t n = 0;
  do {
    n = ::write(fd, &m, sizeof m);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof m)) ::_exit(7);
}

[[noreturn]] void die(const char* what, const Error& e, int code) {
  const std::string s = std::string("kill9 child: ") + what + ": " + e.describe() + "\n";
  (void)!::write(2, s.data(), s.size());
  ::_exit(code);
}

// Never returns: runs until the parent kills it. Uses no gtest macros, and
// leaves with _exit() so no gtest or static teardown runs in the child.
[[noreturn]] void child_main(const Config& cfg, int fd, uint32_t thread_base,
                             Position release_target, int think_us) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // $SYNCLOG_TEST_SIGNAL_HZ: the child lives in a storm (threads do not
  // survive fork, so it starts its own). Never destroyed: the child only
  // leaves by _exit or SIGKILL.
  static const auto storm = SignalStorm::from_env().release();
  (void)storm;
  auto opened = Log::open(cfg);
  if (!opened) die("open", opened.error(), 3);
  Log& log = **opened;
  send(fd, Msg{0, 0, kOpened, 0});
  const auto give_up = Clock::now() + std::chrono::seconds(30);
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kAppenders; ++t) {
    threads.emplace_back([&, t] {
      const uint32_t thread = thread_base + t;
      std::deque<Position> mine;
      for (uint64_t seq = 0;; ++seq) {
        if (t == 0 && seq == 1 && release_target != Position{}) {
          send(fd, Msg{release_target.raw(), 0, kRelease, 0});
          if (auto r = log.release_before(release_target); !r) die("release_before", r.error(), 5);
        }
        const uint32_t size = record_size(thread, seq);
        auto pos = log.append(make_record(thread, seq, size));
        if (!pos) die("append", pos.error(), 4);
        send(fd, Msg{pos->raw(), seq, thread, size});
        if (t == 0) {
          // A rolling release that keeps ~2 MiB behind the head.
          mine.push_back(*pos);
          if (mine.size() > 600) {
            const Position target = mine.front();
            mine.pop_front();
            if (seq % 128 == 0) {
              send(fd, Msg{target.raw(), 0, kRelease, 0});
              if (auto r = log.release_before(target); !r) die("release_before", r.error(), 5);
            }
          }
        }
        if (think_us > 0) {
          // A writer that does other work between appends: then segment
          // allocation is not the bottleneck, and syncs overlap appends.
          std::this_thread::sleep_for(
              std::chrono::microseconds(think_us / 2 + seq * 7919 % think_us));
        }
        if (Clock::now() > give_up) ::_exit(6);  // never killed: the parent is stuck
      }
    });
  }
  for (;;) ::pause();
}

// --------------------------------------------------------------- parent ---

// One log directory that lives across rounds.
struct Lane {
  std::string name;
  std::unique_ptr<TempDir> dir;
  Config cfg;
  std::map<uint64_t, Ident> expected;  // what the last recovery replayed, by position
  Position floor;                      // records before it may have been released
  int rounds = 0;
  uint64_t acks = 0;
  uint64_t killed_before_open = 0;
  double seconds = 0;
};

struct RoundResult {
  std::vector<Msg> acks;
  std::vector<Position> releases;
  bool opened = false;
};

// Reads whole messages from fd into `out` until EOF (returns false), until
// `deadline` or, with stop_at_open, until the child reports an open log.
bool read_acks(int fd, std::string* pending, RoundResult* out,
               std::optional<Clock::time_point> deadline, bool stop_at_open = false) {
  char buf[64 * 1024];
  for (;;) {
    size_t used = 0;
    bool stop = false;
    while (!stop && pending->size() - used >= sizeof(Msg)) {
      Msg m;
      std::memcpy(&m, pending->data() + used, sizeof m);
      used += sizeof m;
      if (m.thread == kOpened) {
        out->opened = true;
        stop = stop_at_open;
      } else if (m.thread == kRelease) {
        out->releases.push_back(Position::from_raw(m.raw));
      } else {
        out->acks.push_back(m);
      }
    }
    pending->erase(0, used);
    if (stop) return true;
    int timeout = -1;
    if (deadline) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
      if (left.count() <= 0) return true;
      timeout = static_cast<int>(left.count()) + 1;
    }
    pollfd p{fd, POLLIN, 0};
    const int rc = ::poll(&p, 1, timeout);
    if (rc <= 0) continue;  // EINTR, or the deadline check above ends the loop
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    pending->append(buf, static_cast<size_t>(n));
  }
}

std::string wait_status(int status) {
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "status " + std::to_string(status);
}

// Checks the recovered log against the acks of round `round` and what the
// previous recovery of this lane replayed; returns "" or what is wrong.
std::string verify(Lane& lane, uint32_t round, const RoundResult& rr) {
  std::ostringstream err;
  auto opened = Log::open(lane.cfg);
  if (!opened) return "reopen failed: " + opened.error().describe();
  Log& log = **opened;
  for (const Damage& d : log.recovery().damage) {
    // An earlier recovery may have left valid but unacknowledged records in
    // segments behind its end; the session record skips them. Anything else
    // is durable data found damaged.
    if (d.reason.find("left behind by an earlier recovery") == std::string::npos) {
      err << "recovery reports damage at " << d.at.to_string() << " (" << d.bytes
          << " bytes): " << d.reason << "\n";
    }
  }
  const Position end = log.recovery().end;
  const bool torn = log.recovery().torn_tail;
  const std::vector<Replayed> replayed = read_all(log);
  if (auto r = log.close(); !r)
    err << "close after replay failed: " << r.error().describe() << "\n";
  opened->reset();

  const uint32_t base = round * kThreadStride;
  std::map<uint64_t, Ident> now;
  Position prev;
  for (const auto& r : replayed) {
    Ident id;
    id.size = static_cast<uint32_t>(r.data.size());
    if (!check_record(r.data, &id.thread, &id.seq)) {
      err << "record at " << r.position.to_string() << " (" << r.data.size()
          << " bytes) is not one that was appended (corrupt or phantom)\n";
      continue;
    }
    if (!now.empty() && !(r.position > prev)) {
      err << "replay order: " << r.position.to_string() << " after " << prev.to_string() << "\n";
    }
    prev = r.position;
    now[r.position.raw()] = id;
  }

  // Earlier rounds: the previous replay again, less a released prefix.
  bool seen_any = false;
  for (const auto& [raw, id] : lane.expected) {
    auto it = now.find(raw);
    const Position at = Position::from_raw(raw);
    if (it == now.end()) {
      if (seen_any || at >= lane.floor) {
        err << "record " << describe(id) << " at " << at.to_string()
            << " replayed in the previous recovery but not now (release floor "
            << lane.floor.to_string() << ")\n";
      }
      continue;
    }
    seen_any = true;
    if (!(it->second == id)) {
      err << "at " << at.to_string() << " the previous recovery replayed " << describe(id)
          << ", now " << describe(it->second) << "\n";
    }
  }
  for (const auto& [raw, id] : now) {
    if (id.thread < base && !lane.expected.contains(raw)) {
      err << "record " << describe(id) << " of an earlier round appeared at "
          << Position::from_raw(raw).to_string() << " (not replayed by the previous recovery)\n";
    }
    if (id.thread >= base + kAppenders) {
      err << "record " << describe(id) << " at " << Position::from_raw(raw).to_string()
          << " names a thread that does not exist yet\n";
    }
  }

  // This round: every ack present at its position; per thread a run of
  // consecutive seqs in position order.
  std::map<uint32_t, std::vector<Msg>> acked;  // thread -> acks in seq order
  for (const Msg& m : rr.acks) {
    acked[m.thread].push_back(m);
    const Position at = Position::from_raw(m.raw);
    const Ident want{m.thread, m.seq, m.size};
    auto it = now.find(m.raw);
    if (it == now.end()) {
      if (at >= lane.floor) {
        err << "acknowledged record " << describe(want) << " at " << at.to_string()
            << " is missing after recovery (release floor " << lane.floor.to_string()
            << ", replay ends at " << prev.to_string() << ")\n";
      }
    } else if (!(it->second == want)) {
      err << "acknowledged record " << describe(want) << " at " << at.to_string() << " replays as "
          << describe(it->second) << "\n";
    }
  }
  for (auto& [thread, list] : acked) {
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i].seq != i) {
        err << "thread " << thread << ": ack " << i << " carries seq " << list[i].seq
            << " (the pipe lost or reordered acks)\n";
        break;
      }
    }
  }
  std::map<uint32_t, std::vector<std::pair<Position, uint64_t>>> runs;
  for (const auto& [raw, id] : now) {
    if (id.thread >= base && id.thread < base + kAppenders) {
      runs[id.thread].push_back({Position::from_raw(raw), id.seq});
    }
  }
  for (const auto& [thread, run] : runs) {
    const auto& acks = acked[thread];
    for (size_t i = 1; i < run.size(); ++i) {
      if (run[i].second != run[i - 1].second + 1) {
        err << "thread " << thread << ": seq " << run[i].second << " at "
            << run[i].first.to_string() << " follows seq " << run[i - 1].second << " at "
            << run[i - 1].first.to_string() << " (a hole or reordering)\n";
      }
    }
    const uint64_t first = run.front().second;
    if (first > 0) {
      // Its predecessor was acknowledged before it was appended.
      if (first - 1 >= acks.size()) {
        err << "thread " << thread << ": seq " << first << " replays but seq " << first - 1
            << " was never acknowledged\n";
      } else if (!(Position::from_raw(acks[first - 1].raw) < lane.floor)) {
        err << "thread " << thread << ": replay starts at seq " << first << ", but seq "
            << first - 1 << " at " << Position::from_raw(acks[first - 1].raw).to_string()
            << " lies past the release floor " << lane.floor.to_string() << "\n";
      }
    }
    if (run.back().second > acks.size()) {
      err << "thread " << thread << ": seq " << run.back().second << " replays, but only "
          << acks.size() << " appends were acknowledged and one can be in flight\n";
    }
  }
  if (std::getenv("SYNCLOG_KILL9_VERBOSE")) {
    Position last_ack;
    for (const Msg& m : rr.acks) last_ack = std::max(last_ack, Position::from_raw(m.raw));
    std::printf(
        "kill9: round %u: %zu acks (last at %s), %zu records replay (end %s), "
        "release floor %s, recovered end %s%s\n",
        round, rr.acks.size(), last_ack.to_string().c_str(), now.size(), prev.to_string().c_str(),
        lane.floor.to_string().c_str(), end.to_string().c_str(), torn ? ", torn tail" : "");
  }
  lane.expected = std::move(now);
  return err.str();
}

TEST(Kill9, AcknowledgedAppendsSurviveSigkill) {
  const uint64_t seed = env_or("SYNCLOG_KILL9_SEED", 20261130);
  const int rounds = static_cast<int>(env_or("SYNCLOG_KILL9_ROUNDS", 32));
  std::printf(
      "kill9: backend %s, seed %llu, %d rounds (SYNCLOG_KILL9_SEED / SYNCLOG_KILL9_ROUNDS)\n",
      backend_under_test().c_str(), static_cast<unsigned long long>(seed), rounds);
  std::mt19937_64 rng(seed);

  Lane lanes[2];
  lanes[0].name = "disk";
  lanes[0].dir = std::make_unique<TempDir>(disk_base());
  lanes[1].name = "shm";
  lanes[1].dir = std::make_unique<TempDir>("/dev/shm");
  for (Lane& lane : lanes) lane.cfg = small_config(lane.dir->path());

  for (int round = 0; round < rounds; ++round) {
    Lane& lane = lanes[round % 2];
    const auto round_start = Clock::now();
    // Every fourth round on a lane counts a short delay from the fork, so
    // the kill may land inside Log::open (recovery, deleting, creating files).
    const bool from_fork = round % 8 >= 6;
    const int delay_ms = from_fork ? std::uniform_int_distribution<int>(1, 8)(rng)
                                   : std::uniform_int_distribution<int>(5, 80)(rng);
    // A third of the rounds append flat out (allocation-bound on a disk);
    // the others pause between appends.
    const int think_us = round % 3 == 0 ? 0 : std::uniform_int_distribution<int>(20, 300)(rng);
    Position release_target;
    if (lane.expected.size() > 3000) {
      auto it = lane.expected.begin();
      std::advance(it, lane.expected.size() - 3000);
      release_target = Position::from_raw(it->first);
    }
    const std::string where = "round " + std::to_string(round) + " (" + lane.name + ", seed " +
                              std::to_string(seed) + ", delay " + std::to_string(delay_ms) +
                              " ms from " + (from_fork ? "fork" : "open") + ", think " +
                              std::to_string(think_us) + " us)";

    {
      // io_uring workers leave on their own time after a ring closes.
      auto threads = user_threads();
      for (int i = 0; i < 100 && threads.size() > max_threads; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        threads = user_threads();
      }
      ASSERT_LE(threads.size(), max_threads)
          << where << ": threads left over before fork(): " << join(threads);
    }
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0) << std::strerror(errno);
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0) << std::strerror(errno);
    if (pid == 0) {
      ::close(fds[0]);
      child_main(lane.cfg, fds[1], static_cast<uint32_t>(round) * kThreadStride, release_target,
                 think_us);
    }
    ::close(fds[1]);

    RoundResult rr;
    std::string pending;
    bool alive = true;
    if (!from_fork) {
      // Wait for the child to open the log (generous: recovery on a slow disk).
      alive = read_acks(fds[0], &pending, &rr, Clock::now() + std::chrono::seconds(30),
                        /*stop_at_open=*/true);
      if (alive && !rr.opened) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        ::close(fds[0]);
        FAIL() << where << ": the child did not open the log within 30 s";
      }
    }
    if (alive) {
      alive = read_acks(fds[0], &pending, &rr, Clock::now() + std::chrono::milliseconds(delay_ms));
    }
    if (alive) ::kill(pid, SIGKILL);
    // Every ack the child wrote before it died is still in the pipe.
    read_acks(fds[0], &pending, &rr, std::nullopt);
    ::close(fds[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << where << ": the child was not killed by us: " << wait_status(status)
        << " (3: open failed, 4: append failed, 5: release failed; see its stderr above)";
    ASSERT_TRUE(pending.empty()) << where << ": a torn message in the pipe";
    for (Position p : rr.releases) lane.floor = std::max(lane.floor, Position(p.segment(), 0));

    const std::string problems = verify(lane, static_cast<uint32_t>(round), rr);
    ASSERT_TRUE(problems.empty()) << where << ", " << rr.acks.size() << " acks:\n"
                                  << problems.substr(0, 4000);
    ++lane.rounds;
    lane.acks += rr.acks.size();
    lane.killed_before_open += rr.opened ? 0 : 1;
    lane.seconds += std::chrono::duration<double>(Clock::now() - round_start).count();
  }
  for (const Lane& lane : lanes) {
    std::printf(
        "kill9: %s: %d rounds, %llu acks checked, %llu kills before open finished, "
        "%zu records in the log at the end, %.2f s\n",
        lane.name.c_str(), lane.rounds, static_cast<unsigned long long>(lane.acks),
        static_cast<unsigned long long>(lane.killed_before_open), lane.expected.size(),
        lane.seconds);
  }
}

}  // namespace
}  // namespace synclog::test
