// Archiving and restore over chains of sessions (docs/durability.md,
// Archiving and Restore). A history is 3-6 sessions on one log, each a
// forked child process that opens the log with archiving on (the
// Config::archive hook or an archive_command running cp, chosen per
// session), replays it, appends (single records, batches, async appends,
// some records large enough to go in as fragments across segments), now
// and then releases everything durable, and ends with a clean close() or a
// process crash: _exit() in the middle of the workload, with async appends,
// syncs and an archive copy possibly in flight. The page cache survives
// such a crash (mmap segments keep what was written), the process state
// does not. Power loss is not modelled here (tests/chain_sim_test.cc does
// that for the plain log).
//
// For a stretch of some sessions the archive fails (the hook returns an
// error, the command exits 1) and then recovers. Every release the child
// makes is checked on the spot: each released segment already has its copy
// in the archive, the ones kept are listed in ReleaseReport::unarchived
// (released ids all below the kept ones), and every segment that was
// releasable but not archived before the call is either released with a
// copy or listed as kept.
//
// The parent keeps the oracle from what the children report over a pipe
// (each acknowledged record's position and identity, each record a crashed
// session began but never saw acknowledged, each session's replay). Every
// open must replay the acknowledged records not released, in order, at
// their positions, and nothing that was never appended; a crashed
// session's unacknowledged record counts once a later replay shows it and
// is forgotten otherwise.
//
// The last session is clean, with the archive working, and appends small
// records over at least two segments; it waits until stats report nothing
// pending, then closes. Then restore() must give, compared with the oracle
// (positions and bytes, in log order):
//   - archive + live, to the end: every record;
//   - archive + live, to a random acknowledged position: the prefix through it;
//   - archive + live, to a time taken between two acknowledged appends
//     (nothing else in flight): the prefix through the earlier one;
//   - archive alone, with the live directory deleted: every record that
//     starts before the segment the durable position was in at the end
//     (the one close() completed, archived only by a later session); the
//     last session's small records make that boundary exact.
//
// Between sessions the parent (a child subreaper) waits for any archive
// command a crashed child left running, so each history is reproducible
// from its seed. Two fixed cases stand beside the random histories: a
// record in fragments running from the last archived segment into the
// active one (absent from an archive-only restore, everything before it
// present), and an archive command that outlives a crash and writes its
// copy after the next session released and recycled past its segment.
//
// SYNCLOG_ARCHIVE_CHAIN_HISTORIES (default 10) and SYNCLOG_ARCHIVE_CHAIN_SEED
// size and seed the run; SYNCLOG_ARCHIVE_CHAIN_HISTORY=<seed> runs the one
// history a failure names.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "segments/segment.h"
#include "signal_storm.h"
#include "synclog/log.h"
#include "synclog/restore.h"
#include "test_util.h"

namespace synclog::test {
namespace {

namespace fs = std::filesystem;

long long env_long(const char* name, long long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 0) : fallback;
}

// One report from a child. 40 bytes: a write() of it is atomic (< PIPE_BUF),
// so the completion thread and the main thread never interleave one.
enum class Kind : uint32_t {
  intent,   // an append of (thread, seq, size) is about to start
  ack,      // (thread, seq) acknowledged at pos; flag: a batch's last record or a single one
  replay,   // open replayed (thread, seq, size) at pos
  time,     // value: unix ns taken after the ack of the record at pos, nothing in flight
  release,  // value: highest segment id released; size: segments kept unarchived;
            // thread: 1 if the archive was failing
  stats,    // value: archive failures this session
  done,     // pos: durable() once nothing was pending, just before the final close
};
struct Msg {
  Kind kind = Kind::intent;
  uint32_t thread = 0;
  uint64_t seq = 0;
  uint64_t size = 0;
  uint64_t pos = 0;
  uint64_t value = 0;
};
static_assert(sizeof(Msg) == 40 && sizeof(Msg) <= PIPE_BUF);

constexpr int kCrashExit = 9;
constexpr int kCheckExit = 3;

struct SessionPlan {
  uint64_t seed = 0;
  uint32_t thread = 0;  // records' thread id: unique per session of a history
  int ops = 0;
  int crash_at = -1;  // op index where the process dies; -1: clean close
  bool hook = true;   // Config::archive; else archive_command
  SyncMode mode = SyncMode::batch;
  int fail_from = -1, fail_to = -1;  // ops during which the archive fails
  bool last = false;
};

// ---------------------------------------------------------------- child ---
// No gtest macros here: a failed check prints and leaves with kCheckExit.

struct Child {
  int fd;
  const SessionPlan& plan;
  fs::path dir, archive, fail_flag;
  std::atomic<bool> failing{false};
  std::atomic<int64_t> in_flight{0};  // async appends not completed yet

  void send(const Msg& m) {
    // A failed write means the parent is gone: nothing left to report to.
    // (Under a signal storm a write can be cut short before it wrote anything.)
    ssize_t n = 0;
    do {
      n = ::write(fd, &m, sizeof m);
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(sizeof m)) ::_exit(7);
  }
  [[noreturn]] void fail(const std::string& what) {
    const std::string s =
        "archive-chain child (session thread " + std::to_string(plan.thread) + "): " + what + "\n";
    (void)!::write(2, s.data(), s.size());
    ::_exit(kCheckExit);
  }
  void set_failing(bool on) {
    failing = on;
    if (on) {
      std::ofstream(fail_flag).put('1');
    } else {
      fs::remove(fail_flag);
    }
  }
  bool archived(uint64_t id) const { return fs::exists(archive / seg::segment_file_name(id)); }

  Config config() {
    Config cfg = small_config(dir);
    cfg.mode = plan.mode;
    cfg.window = std::chrono::microseconds(200);
    cfg.max_record = 3 * cfg.segment_size;
    if (plan.hook) {
      cfg.archive = [this](const fs::path& path, uint64_t id) -> Result<void> {
        if (failing.load()) return make_error(Errc::io_error, "archive unreachable (injected)");
        // Through a temporary name: a crash mid-copy leaves no short copy
        // under the segment's name (the next session copies it again).
        const fs::path tmp = archive / (seg::segment_file_name(id) + ".tmp");
        std::error_code ec;
        fs::copy_file(path, tmp, fs::copy_options::overwrite_existing, ec);
        if (!ec) fs::rename(tmp, archive / seg::segment_file_name(id), ec);
        if (ec) return make_error(Errc::io_error, "archive copy: " + ec.message());
        return {};
      };
    } else {
      cfg.archive_command =
          "test ! -e " + fail_flag.string() + " && cp %p " + archive.string() + "/%f";
    }
    return cfg;
  }

  void release(Log& log) {
    // Releasable (by position) and not archived before the call: each must
    // come out released with its copy, or kept and listed.
    auto before = log.segments();
    if (!before) fail("segments(): " + before.error().describe());
    std::vector<uint64_t> must;
    for (const auto& s : *before) {
      if (s.state == SegmentState::releasable && !archived(s.id)) must.push_back(s.id);
    }
    auto r = log.release_before(log.durable());
    if (!r) fail("release_before: " + r.error().describe());
    if (!std::is_sorted(r->ids.begin(), r->ids.end()) ||
        !std::is_sorted(r->unarchived.begin(), r->unarchived.end())) {
      fail("release report ids not ascending");
    }
    if (!r->ids.empty() && !r->unarchived.empty() && r->ids.back() >= r->unarchived.front()) {
      fail("released segment " + std::to_string(r->ids.back()) + " after kept segment " +
           std::to_string(r->unarchived.front()));
    }
    for (uint64_t id : r->ids) {
      if (!archived(id)) fail("segment " + std::to_string(id) + " released, never archived");
    }
    for (uint64_t id : must) {
      const bool released = std::find(r->ids.begin(), r->ids.end(), id) != r->ids.end();
      const bool kept =
          std::find(r->unarchived.begin(), r->unarchived.end(), id) != r->unarchived.end();
      if (!released && !kept) {
        fail("unarchived releasable segment " + std::to_string(id) +
             " neither released nor listed in unarchived");
      }
    }
    send(Msg{Kind::release, failing.load() ? 1u : 0u, 0, r->unarchived.size(), 0,
             r->ids.empty() ? 0 : r->ids.back()});
  }

  void wait_in_flight() {
    for (int i = 0; in_flight.load() > 0; ++i) {
      if (i > 60'000) fail("async completions never came");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  [[noreturn]] void run() {
    ::alarm(120);  // a hung child dies and the parent reports it
    // $SYNCLOG_TEST_SIGNAL_HZ: the session (open, appends, syncs, archiving,
    // release) runs in a signal storm. Only the child: the parent must stay
    // one thread to fork. Never destroyed: the child leaves by _exit.
    static const auto storm = SignalStorm::from_env().release();
    (void)storm;
    set_failing(false);
    auto opened = Log::open(config());
    if (!opened) fail("Log::open: " + opened.error().describe());
    Log& log = **opened;
    {
      auto reader = log.read();
      if (!reader) fail("read(): " + reader.error().describe());
      for (;;) {
        auto rec = reader->next();
        if (!rec) fail("replay: " + rec.error().describe());
        if (!*rec) break;
        const std::string_view bytes(reinterpret_cast<const char*>((*rec)->data.data()),
                                     (*rec)->data.size());
        uint32_t t = 0;
        uint64_t s = 0;
        if (!check_record(bytes, &t, &s)) {
          fail("replayed a record that was never appended (G3) at " + (*rec)->position.to_string());
        }
        send(Msg{Kind::replay, t, s, bytes.size(), (*rec)->position.raw(), 0});
      }
    }

    std::mt19937_64 rng(plan.seed);
    const uint64_t whole = log.config().max_unfragmented_size();
    const uint64_t max_record = log.config().max_record_size();
    uint64_t seq = 0;
    std::optional<Position> last_ack;  // of a blocking call, nothing in flight since
    std::optional<Position> first_ack;
    auto small = [&] { return static_cast<size_t>(16 + rng() % 6000); };  // check_record needs 16
    auto acked = [&](uint64_t s, Position p, bool last_of_call) {
      send(Msg{Kind::ack, plan.thread, s, 0, p.raw(), last_of_call ? 1u : 0u});
    };
    auto blocking = [&](size_t size) {
      const uint64_t s = seq++;
      send(Msg{Kind::intent, plan.thread, s, size, 0, 0});
      auto pos = log.append(make_record(plan.thread, s, size));
      if (!pos) fail("append: " + pos.error().describe());
      acked(s, *pos, true);
      if (!first_ack) first_ack = *pos;
      last_ack = *pos;
    };
    auto async = [&](size_t size) {
      const uint64_t s = seq++;
      send(Msg{Kind::intent, plan.thread, s, size, 0, 0});
      ++in_flight;
      auto pos = log.append_async(make_record(plan.thread, s, size), [this, s](Result<Position> r) {
        // An error (the log closing first) leaves the record unacknowledged.
        if (r) send(Msg{Kind::ack, plan.thread, s, 0, r->raw(), 1});
        --in_flight;
      });
      if (!pos) fail("append_async: " + pos.error().describe());
      last_ack.reset();
    };

    uint64_t failures_before = 0;
    for (int i = 0; i < plan.ops; ++i) {
      if (i == plan.crash_at) {
        send(Msg{Kind::stats, 0, 0, 0, 0, log.stats().archive_failures});
        ::_exit(kCrashExit);  // no close(): threads, the page cache and all
      }
      if (i == plan.fail_from) {
        set_failing(true);
        failures_before = log.stats().archive_failures;
      }
      if (i == plan.fail_to) {
        // Ops take far less than the archiver's 20 ms poll: let it fail at
        // least once on a pending segment before the archive recovers.
        for (int w = 0; w < 300 && log.stats().archive_pending > 0 &&
                        log.stats().archive_failures == failures_before;
             ++w) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        release(log);  // while it fails: what is pending must stay
        set_failing(false);
      }
      const int op = static_cast<int>(rng() % 100);
      if (op < 35) {
        blocking(small());
      } else if (op < 50) {
        const size_t n = 1 + rng() % 5;
        std::vector<std::string> recs;
        std::vector<uint64_t> seqs;
        for (size_t k = 0; k < n; ++k) {
          const uint64_t s = seq++;
          const size_t size = small();
          send(Msg{Kind::intent, plan.thread, s, size, 0, 0});
          recs.push_back(make_record(plan.thread, s, size));
          seqs.push_back(s);
        }
        std::vector<std::string_view> views(recs.begin(), recs.end());
        if (rng() % 3 == 0) {
          // The completion may run before the call returns the positions:
          // whichever comes second reports the acks.
          struct Pending {
            std::mutex mu;
            std::vector<Position> at;
            bool durable = false;
          };
          auto p = std::make_shared<Pending>();
          auto report = [this, p, seqs] {
            for (size_t k = 0; k < seqs.size(); ++k) {
              send(Msg{Kind::ack, plan.thread, seqs[k], 0, p->at[k].raw(), k + 1 == seqs.size()});
            }
          };
          ++in_flight;
          auto pos = log.append_batch_async(views, [this, p, report](Result<Position> r) {
            {
              std::lock_guard lock(p->mu);
              p->durable = r.has_value();
              if (r && !p->at.empty()) report();
            }
            --in_flight;
          });
          if (!pos) fail("append_batch_async: " + pos.error().describe());
          std::lock_guard lock(p->mu);
          p->at = *pos;
          if (p->durable) report();
          last_ack.reset();
          continue;
        }
        auto pos = log.append_batch(views);
        if (!pos) fail("append_batch: " + pos.error().describe());
        for (size_t k = 0; k < n; ++k) acked(seqs[k], (*pos)[k], k + 1 == n);
        if (!first_ack) first_ack = pos->front();
        last_ack = pos->back();
      } else if (op < 70) {
        async(small());
      } else if (op < 76 && !plan.last) {
        const size_t size = whole + 1 + rng() % (max_record - whole);
        if (rng() % 2) {
          blocking(size);
        } else {
          async(size);
        }
      } else if (op < 86) {
        release(log);
      } else if (op < 94) {
        if (!last_ack) continue;
        wait_in_flight();
        // Every record before it is acknowledged, the next append has not
        // begun: a restore to this time holds exactly the records up to it.
        const auto now = std::chrono::system_clock::now().time_since_epoch();
        send(Msg{Kind::time, 0, 0, 0, last_ack->raw(),
                 static_cast<uint64_t>(std::chrono::nanoseconds(now).count())});
      } else {
        if (auto r = log.sync(); !r) fail("sync: " + r.error().describe());
      }
    }
    if (plan.last) {
      // Small records over at least two segments of this session: every
      // record before the segment close() completes lies wholly in
      // segments archived by then.
      wait_in_flight();
      if (!first_ack || !last_ack) blocking(small());
      while (last_ack->segment() < first_ack->segment() + 1) blocking(small());
      if (auto r = log.sync(); !r) fail("sync: " + r.error().describe());
      wait_in_flight();
      for (int i = 0; log.stats().archive_pending != 0; ++i) {
        if (i > 6'000) fail("archive_pending never reached 0: " + log.stats().archive_error);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      send(Msg{Kind::done, 0, 0, 0, log.durable().raw(), 0});
    }
    send(Msg{Kind::stats, 0, 0, 0, 0, log.stats().archive_failures});
    if (auto r = log.close(); !r) fail("close: " + r.error().describe());
    ::_exit(0);
  }
};

// --------------------------------------------------------------- parent ---

struct Rec {
  uint32_t thread = 0;
  uint64_t seq = 0;
  uint64_t size = 0;
  bool stop_ok = false;  // a restore may stop at it: a single record or a batch's last
};

struct Totals {
  uint64_t histories = 0, sessions = 0, crashes = 0, records = 0, archive_failures = 0,
           kept_unarchived = 0, releases = 0, restores = 0, failures = 0, unacked_replayed = 0,
           kept_while_failing = 0;
};

// Threads of this process, not counting io_uring's kernel workers: fork()
// needs the parent single-threaded (a log's threads are gone after close).
size_t user_threads() {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/self/task", ec)) {
    std::ifstream in(e.path() / "comm");
    std::string name;
    std::getline(in, name);
    if (!name.starts_with("iou-")) ++n;
  }
  return n;
}

std::vector<Replayed> expected(const std::map<Position, Rec>& oracle,
                               const std::function<bool(Position)>& keep) {
  std::vector<Replayed> out;
  for (const auto& [pos, r] : oracle) {
    if (keep(pos)) out.push_back({pos, make_record(r.thread, r.seq, r.size)});
  }
  return out;
}

class History {
 public:
  History(uint64_t seed, Totals* totals) : seed_(seed), totals_(totals) {}

  void run() {
    std::mt19937_64 rng(seed_);
    const int sessions = 3 + static_cast<int>(rng() % 4);
    fs::create_directories(archive());
    fs::create_directories(log_dir());
    for (int s = 0; s < sessions; ++s) {
      SessionPlan p;
      p.seed = rng();
      p.thread = static_cast<uint32_t>(s + 1);
      p.ops = 30 + static_cast<int>(rng() % 60);
      p.last = s + 1 == sessions;
      p.hook = rng() % 2 == 0;
      p.mode = rng() % 3 == 0 ? SyncMode::group : SyncMode::batch;
      if (!p.last && rng() % 2 == 0) p.crash_at = static_cast<int>(rng() % p.ops);
      if (!p.last && rng() % 3 != 0) {
        p.fail_from = static_cast<int>(rng() % p.ops);
        p.fail_to = rng() % 3 == 0 ? -1 : p.fail_from + 1 + static_cast<int>(rng() % p.ops);
      }
      trail_ += " | s" + std::to_string(s + 1) + (p.hook ? " hook " : " command ") +
                to_string(p.mode) + " " + std::to_string(p.ops) + " ops" +
                (p.fail_from >= 0 ? ", archive fails from op " + std::to_string(p.fail_from) +
                                        (p.fail_to >= 0 ? " to " + std::to_string(p.fail_to) : "")
                                  : "") +
                (p.crash_at >= 0 ? ", crash at op " + std::to_string(p.crash_at) : ", clean");
      if (!session(p)) return;
    }
    check_restores(rng);
  }

 private:
  fs::path log_dir() const { return dir_.path() / "log"; }
  fs::path archive() const { return dir_.path() / "archive"; }
  std::string where() const {
    return "history seed " + std::to_string(seed_) + " (backend " + backend_under_test() +
           "):" + trail_;
  }

  bool session(const SessionPlan& plan) {
    ++totals_->sessions;
    if (plan.crash_at >= 0) ++totals_->crashes;
    // The main thread alone, and under ThreadSanitizer its background
    // thread once started (TSan counts only user threads at a fork()).
    const size_t threads = user_threads();
    if (threads > (kThreadSanitized ? 2 : 1)) {
      ADD_FAILURE() << where() << ": " << threads << " threads before fork()";
      return false;
    }
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe2: " << std::strerror(errno);
      return false;
    }
    std::cout.flush();
    std::cerr.flush();
    const pid_t pid = ::fork();
    if (pid < 0) {
      ADD_FAILURE() << "fork: " << std::strerror(errno);
      return false;
    }
    if (pid == 0) {
      ::close(fds[0]);
      Child child{fds[1], plan, log_dir(), archive(), dir_.path() / "archive-fails"};
      child.run();
    }
    ::close(fds[1]);
    trail_ += " (pid " + std::to_string(pid) + ")";
    std::vector<Msg> msgs;
    std::string buf;
    char chunk[4096];
    for (;;) {
      const ssize_t n = ::read(fds[0], chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      buf.append(chunk, static_cast<size_t>(n));
    }
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    // An archive command the crashed child had started lives on (this
    // process is their subreaper): let it finish before the next session,
    // as an operator's restart would wait for the old process's children.
    // Until it has exec'd it even holds the LOCK, and a late cp could copy
    // a segment the next session already released and recycled.
    while (::waitpid(-1, nullptr, 0) > 0) {
    }
    const int want = plan.crash_at >= 0 ? kCrashExit : 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != want) {
      ADD_FAILURE() << where() << ": the session's child ended with status " << status << " (exit "
                    << (WIFEXITED(status) ? WEXITSTATUS(status) : -1) << "), want exit " << want
                    << " (its stderr above says why)";
      return false;
    }
    if (buf.size() % sizeof(Msg) != 0) {
      ADD_FAILURE() << where() << ": a torn report in the pipe";
      return false;
    }
    for (size_t off = 0; off < buf.size(); off += sizeof(Msg)) {
      Msg m;
      std::memcpy(&m, buf.data() + off, sizeof m);
      msgs.push_back(m);
    }
    return absorb(plan, msgs);
  }

  // Checks the session's replay against the oracle, then adds what it
  // acknowledged.
  bool absorb(const SessionPlan& plan, const std::vector<Msg>& msgs) {
    std::map<Position, Rec> replay;
    std::map<std::pair<uint32_t, uint64_t>, uint64_t> intents;  // (thread, seq) -> size
    std::map<std::pair<uint32_t, uint64_t>, std::pair<Position, bool>> acks;
    for (const Msg& m : msgs) {
      switch (m.kind) {
        case Kind::replay:
          replay[Position::from_raw(m.pos)] = Rec{m.thread, m.seq, m.size, false};
          break;
        case Kind::intent:
          intents[{m.thread, m.seq}] = m.size;
          break;
        case Kind::ack:
          acks[{m.thread, m.seq}] = {Position::from_raw(m.pos), m.value != 0};
          break;
        case Kind::time:
          times_.push_back({m.value, Position::from_raw(m.pos)});
          break;
        case Kind::release:
          released_max_ = std::max(released_max_, m.value);
          totals_->kept_unarchived += m.size;
          if (m.thread != 0 && m.size != 0) ++totals_->kept_while_failing;
          ++totals_->releases;
          break;
        case Kind::stats:
          totals_->archive_failures += m.value;
          break;
        case Kind::done:
          done_ = Position::from_raw(m.pos);
          break;
      }
    }
    // Every record replayed was acknowledged, or begun by the crashed
    // session before (which then counts as written); every acknowledged
    // record not released is replayed, in place.
    for (const auto& [pos, r] : replay) {
      auto it = oracle_.find(pos);
      if (it != oracle_.end()) {
        if (it->second.thread != r.thread || it->second.seq != r.seq || it->second.size != r.size) {
          ADD_FAILURE() << where() << ": session " << plan.thread << " replayed (" << r.thread
                        << ", " << r.seq << ") at " << pos.to_string() << " where ("
                        << it->second.thread << ", " << it->second.seq << ") was acknowledged";
          return false;
        }
        continue;
      }
      auto maybe = maybe_.find({r.thread, r.seq});
      if (maybe == maybe_.end() || maybe->second != r.size) {
        ADD_FAILURE() << where() << ": session " << plan.thread << " replayed (" << r.thread << ", "
                      << r.seq << ", " << r.size << " bytes) at " << pos.to_string()
                      << ", which no earlier session acknowledged or began (G3)";
        return false;
      }
      oracle_[pos] = r;
      ++totals_->unacked_replayed;
    }
    maybe_.clear();
    // Past the first record replayed, nothing may be missing (no hole).
    const uint64_t first = replay.empty() ? UINT64_MAX : replay.begin()->first.raw();
    for (const auto& [pos, r] : oracle_) {
      const bool needed = pos.segment() > released_before_session_ || pos.raw() >= first;
      if (needed && !replay.count(pos)) {
        ADD_FAILURE() << where() << ": session " << plan.thread << " did not replay (" << r.thread
                      << ", " << r.seq << ") acknowledged at " << pos.to_string()
                      << " (G1; segments up to " << released_before_session_ << " were released)";
        return false;
      }
    }
    for (const auto& [key, size] : intents) {
      auto a = acks.find(key);
      if (a == acks.end()) {
        maybe_[key] = size;
        continue;
      }
      if (oracle_.count(a->second.first)) {
        ADD_FAILURE() << where() << ": two records acknowledged at " << a->second.first.to_string();
        return false;
      }
      oracle_[a->second.first] = Rec{key.first, key.second, size, a->second.second};
      ++totals_->records;
    }
    released_before_session_ = released_max_;
    return true;
  }

  // Restores into a fresh target and compares what it replays.
  // With `at_least` (a time stop after a segment's last records), the
  // restore may keep fewer than `want`: any prefix of it that holds the
  // first `at_least` records. The sync of a segment's last records may have
  // had no room for its marker, and only markers carry a time.
  void restore_and_compare(RestoreOptions o, const std::vector<Replayed>& want,
                           const std::string& what, std::optional<size_t> at_least = {}) {
    ++totals_->restores;
    o.archive = archive();
    o.target = dir_.path() / ("restored-" + std::to_string(totals_->restores));
    auto report = restore(o);
    ASSERT_TRUE(report.has_value())
        << where() << ": restore " << what << ": " << report.error().describe();
    auto got = replay_all(small_config(o.target));
    ASSERT_TRUE(got.has_value()) << where() << ": opening the restore " << what << ": "
                                 << got.error().describe();
    size_t n = want.size();
    if (at_least && got->size() >= *at_least && got->size() < want.size()) n = got->size();
    EXPECT_EQ(report->records, n) << where() << ": restore " << what;
    EXPECT_TRUE(same_records(*got, std::vector<Replayed>(want.begin(), want.begin() + n)))
        << where() << ": restore " << what;
  }

  void check_restores(std::mt19937_64& rng) {
    ASSERT_TRUE(done_.has_value()) << where() << ": the last session reported no end";
    ASSERT_FALSE(oracle_.empty());
    const auto all = expected(oracle_, [](Position) { return true; });
    RestoreOptions o;
    o.live = log_dir();
    o.stop = RestoreStop::end;
    restore_and_compare(o, all, "to the end from the archive and the live directory");

    std::vector<Position> stops;
    for (const auto& [pos, r] : oracle_) {
      if (r.stop_ok) stops.push_back(pos);
    }
    if (!stops.empty()) {
      const Position at = stops[rng() % stops.size()];
      o.stop = RestoreStop::position;
      o.position = at;
      restore_and_compare(o, expected(oracle_, [&](Position p) { return p <= at; }),
                          "to position " + at.to_string());
    }
    if (!times_.empty()) {
      const auto [ns, at] = times_[rng() % times_.size()];
      o.stop = RestoreStop::time;
      o.time_ns = ns;
      // After the last records of a segment: those in that segment may be
      // absent (no marker of their sync), everything before it is there.
      const auto next = oracle_.upper_bound(at);
      std::optional<size_t> at_least;
      if (next == oracle_.end() || next->first.segment() > at.segment()) {
        at_least = expected(oracle_, [&](Position p) { return p.segment() < at.segment(); }).size();
      }
      restore_and_compare(
          o, expected(oracle_, [&](Position p) { return p <= at; }),
          "to time " + std::to_string(ns) + " (after the ack at " + at.to_string() + ")", at_least);
    }

    // The archive alone: the segment close() completed is archived only by
    // a later session, so its records are absent; everything before it is
    // there.
    fs::remove_all(log_dir());
    o.live.clear();  // a live directory named but missing is refused
    const uint64_t active = done_->segment();
    o.stop = RestoreStop::end;
    restore_and_compare(
        o, expected(oracle_, [&](Position p) { return p.segment() < active; }),
        "to the end from the archive alone (segments before " + std::to_string(active) + ")");
  }

  const uint64_t seed_;
  Totals* totals_;
  TempDir dir_;
  std::string trail_;
  std::map<Position, Rec> oracle_;
  // Begun by the last session, never acknowledged: (thread, seq) -> size.
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> maybe_;
  std::vector<std::pair<uint64_t, Position>> times_;
  uint64_t released_max_ = 0;             // highest segment id any release let go
  uint64_t released_before_session_ = 0;  // the same before the session being absorbed
  std::optional<Position> done_;
};

// The archive holds the segments before the active one; a record in
// fragments that begins in the last archived segment and ends in the
// active one is absent from an archive-only restore, while every record
// before it comes back.
TEST(ArchiveChain, ArchiveOnlyRestoreEndsBeforeARecordThatRunsIntoTheActiveSegment) {
  TempDir dir;
  const fs::path log_dir = dir.path() / "log", arch = dir.path() / "archive";
  fs::create_directories(log_dir);
  fs::create_directories(arch);
  Config cfg = small_config(log_dir);
  cfg.max_record = 3 * cfg.segment_size;
  cfg.archive_command = "cp %p " + arch.string() + "/%f";
  std::vector<Replayed> acked;
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    uint64_t seq = 0;
    auto add = [&](size_t size) {
      std::string rec = make_record(1, seq++, size);
      auto pos = (*log)->append(rec);
      ASSERT_TRUE(pos.has_value()) << pos.error().describe();
      acked.push_back({*pos, rec});
    };
    for (int i = 0; i < 60; ++i) add(5000);  // into segment 2
    // Two and a half segments: it ends in the middle of the segment after
    // next, which stays the active one. (A record that ends exactly at a
    // segment's end may leave the next segment active: then all of it is
    // archived and restored.)
    add(2 * cfg.segment_size + cfg.segment_size / 2);
    ASSERT_TRUE((*log)->sync().has_value());
    const uint64_t active = (*log)->durable().segment();
    ASSERT_EQ(active, acked.back().position.segment() + 2);
    for (int i = 0; i < 300 && (*log)->stats().archive_pending != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ((*log)->stats().archive_pending, 0u) << (*log)->stats().archive_error;
    ASSERT_TRUE((*log)->close().has_value());
  }
  RestoreOptions o;
  o.archive = arch;
  o.target = dir.path() / "restored";
  auto report = restore(o);
  ASSERT_TRUE(report.has_value()) << report.error().describe();
  auto got = replay_all(small_config(o.target));
  ASSERT_TRUE(got.has_value()) << got.error().describe();
  EXPECT_TRUE(same_records(*got, std::vector<Replayed>(acked.begin(), acked.end() - 1)));
}

// A process crash leaves its archive_command running. Here it has read
// the start of segment 1 and writes its copy only after the next session
// has archived segment 1 itself, released it and appended on (reusing
// recycled files as spares). The late copy must still be the segment's
// bytes: a restore from that archive gives every record back.
TEST(ArchiveChain, ArchiveCommandOutlivingACrashCannotSpoilTheArchive) {
  TempDir dir;
  const fs::path log_dir = dir.path() / "log", arch = dir.path() / "archive";
  const fs::path started = dir.path() / "started", go = dir.path() / "go",
                 finished = dir.path() / "finished";
  fs::create_directories(log_dir);
  fs::create_directories(arch);
  Config cfg = small_config(log_dir);
  // cat reads ahead what the pipe takes, then the rest once `go` exists.
  cfg.archive_command = "touch " + started.string() + "; cat %p | (while [ ! -e " + go.string() +
                        " ]; do sleep 0.01; done; cat > " + arch.string() + "/%f; touch " +
                        finished.string() + ")";
  std::vector<Replayed> acked;
  std::cout.flush();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0) << std::strerror(errno);
  if (pid == 0) {
    auto log = Log::open(cfg);
    if (!log) ::_exit(3);
    for (uint64_t i = 0; i < 200; ++i) {
      if (!(*log)->append(make_record(1, i, 4000))) ::_exit(4);
    }
    for (int i = 0; i < 2000 && !fs::exists(started); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::_exit(9);  // the command for segment 1 is running
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 9) << status;
  ASSERT_TRUE(fs::exists(started));

  cfg.archive_command = "cp %p " + arch.string() + "/%f";
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    acked = read_all(**log);
    ASSERT_EQ(acked.size(), 200u);
    auto wait_archived = [&] {
      for (int i = 0; i < 2000 && (*log)->stats().archive_pending != 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      ASSERT_EQ((*log)->stats().archive_pending, 0u) << (*log)->stats().archive_error;
    };
    wait_archived();
    auto released = (*log)->release_before((*log)->durable());
    ASSERT_TRUE(released.has_value()) << released.error().describe();
    ASSERT_FALSE(released->ids.empty());
    ASSERT_EQ(released->ids.front(), 1u);
    for (uint64_t i = 0; i < 300; ++i) {
      std::string rec = make_record(2, i, 4000);
      auto pos = (*log)->append(rec);
      ASSERT_TRUE(pos.has_value()) << pos.error().describe();
      acked.push_back({*pos, rec});
    }
    wait_archived();
    ASSERT_TRUE((*log)->close().has_value());
  }
  std::ofstream(go).put('1');
  for (int i = 0; i < 2000 && !fs::exists(finished); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(fs::exists(finished)) << "the crashed process's archive command never finished";

  RestoreOptions o;
  o.archive = arch;
  o.live = log_dir;
  o.target = dir.path() / "restored";
  auto report = restore(o);
  ASSERT_TRUE(report.has_value()) << report.error().describe();
  auto got = replay_all(small_config(o.target));
  ASSERT_TRUE(got.has_value()) << got.error().describe();
  EXPECT_TRUE(same_records(*got, acked));
}

TEST(ArchiveChain, RandomHistoriesRestoreWhatWasAcknowledged) {
  const int histories =
      static_cast<int>(env_long("SYNCLOG_ARCHIVE_CHAIN_HISTORIES", kSanitized ? 3 : 10));
  const uint64_t base_seed = static_cast<uint64_t>(
      env_long("SYNCLOG_ARCHIVE_CHAIN_SEED",
               0xa3c4 + std::hash<std::string>{}(backend_under_test()) % 1000));
  std::vector<uint64_t> seeds;
  if (const char* one = std::getenv("SYNCLOG_ARCHIVE_CHAIN_HISTORY"); one && *one) {
    seeds.push_back(std::strtoull(one, nullptr, 0));
  } else {
    for (int h = 0; h < histories; ++h) seeds.push_back(base_seed * 1000 + h);
  }
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0) << std::strerror(errno);
  Totals t;
  for (uint64_t seed : seeds) {
    const int before =
        testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
    ++t.histories;
    History(seed, &t).run();
    if (testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count() >
        before) {
      ++t.failures;
    }
  }
  std::cout << "[archive-chain] backend " << backend_under_test() << ", base seed " << base_seed
            << ": " << t.histories << " histories, " << t.sessions << " sessions (" << t.crashes
            << " process crashes), " << t.records << " acknowledged records (" << t.unacked_replayed
            << " unacknowledged ones replayed later), " << t.archive_failures
            << " archive failures injected, " << t.releases << " releases (" << t.kept_unarchived
            << " segments kept unarchived; " << t.kept_while_failing
            << " releases kept some while the archive failed), " << t.restores
            << " restores checked, " << t.failures << " failed histories\n";
}

}  // namespace
}  // namespace synclog::test
