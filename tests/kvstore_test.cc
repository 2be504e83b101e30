// examples/kvstore under SIGKILL: the test runs the kvstore binary
// (KVSTORE_BIN) as a child, pipes it puts, dels and checkpoints, reads its
// "ok" acknowledgements, and SIGKILLs it at a random moment with several
// commands still in flight. Some commands are mputs (one write batch each),
// so a recovered state holding part of one matches no prefix. After a
// restart, `get` of every key must show the state after some prefix of the
// commands sent: every acknowledged change is there (G1), nothing later than
// an unacknowledged one, nothing invented (G2, G3). The store keeps its
// directory across rounds, so each restart recovers a log and a snapshot
// written by earlier, killed sessions. Rounds alternate between the build
// tree (a real disk) and /dev/shm; the last round quits cleanly instead.
//
// $SYNCLOG_KVSTORE_SEED and $SYNCLOG_KVSTORE_ROUNDS override the fixed seed
// and the rounds per medium.
//
// PutManyIsRecoveredWholeOrNotAtAll cuts a closed log inside an mput's
// batch record: the puts before it come back, none of the batch's keys.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "pipe_lines.h"
#include "segments/format.h"
#include "test_util.h"

namespace synclog::test {
namespace {

using State = std::map<std::string, std::string>;

constexpr int kKeys = 48;
constexpr int kReplyTimeoutMs = 60'000;

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 0) : fallback;
}

std::string key_name(int k) { return "k" + std::to_string(k); }

// One command and what it does to the state.
struct Op {
  enum { put, del, checkpoint, mput } kind;
  std::string key, value;
  std::vector<std::pair<std::string, std::string>> pairs;  // mput
  std::string line() const {
    switch (kind) {
      case put:
        return "put " + key + " " + value + "\n";
      case del:
        return "del " + key + "\n";
      case checkpoint:
        return "checkpoint\n";
      case mput: {
        std::string l = "mput";
        for (const auto& [k, v] : pairs) l += " " + k + " " + v;
        return l + "\n";
      }
    }
    return {};
  }
  void apply(State* s) const {
    if (kind == put) (*s)[key] = value;
    if (kind == del) s->erase(key);
    for (const auto& [k, v] : pairs) (*s)[k] = v;
  }
};

// The kvstore child: stdin and stdout are pipes; stderr is the test's.
class Child {
 public:
  Child(const std::string& dir, const std::string& config) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::execl(KVSTORE_BIN, "kvstore", dir.c_str(), config.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~Child() {
    if (pid_ > 0) kill();
    ::close(to_);
    ::close(from_);
  }

  void send(const std::string& s) {
    for (size_t done = 0; done < s.size();) {
      const ssize_t n = ::write(to_, s.data() + done, s.size() - done);
      ASSERT_GT(n, 0) << "write to kvstore: " << std::strerror(errno);
      done += static_cast<size_t>(n);
    }
  }

  // The next line of output; nullopt at end of output or after the timeout.
  std::optional<std::string> line() { return lines_.next(from_, kReplyTimeoutMs); }

  void kill() {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  // Closes stdin and waits; returns the exit status.
  int wait_exit() {
    ::close(to_);
    to_ = -1;
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  PipeLines lines_;
};

// Reads every key back with `get`.
State read_state(Child& c) {
  std::string gets;
  for (int k = 0; k < kKeys; ++k) gets += "get " + key_name(k) + "\n";
  gets += "get never-written\n";
  c.send(gets);
  State s;
  for (int k = 0; k <= kKeys; ++k) {
    auto l = c.line();
    EXPECT_TRUE(l.has_value()) << "kvstore gave no answer to get";
    if (!l) break;
    if (l->starts_with("value ")) {
      EXPECT_LT(k, kKeys) << "a never-written key has a value: " << *l;
      s[key_name(k)] = l->substr(6);
    } else {
      EXPECT_EQ(*l, "not found");
    }
  }
  return s;
}

std::string describe_diff(const State& got, const State& want) {
  std::string out;
  for (int k = 0; k < kKeys; ++k) {
    const auto key = key_name(k);
    auto g = got.find(key), w = want.find(key);
    const std::string gs = g == got.end() ? "(none)" : g->second;
    const std::string ws = w == want.end() ? "(none)" : w->second;
    if (gs != ws) out += "  " + key + ": got " + gs + ", acknowledged " + ws + "\n";
  }
  return out;
}

struct Tally {
  uint64_t kills = 0, acked = 0, in_flight = 0, recovered_in_flight = 0;
};

void run_rounds(const std::string& base, uint32_t rounds, std::mt19937_64& rng, Tally* tally) {
  TempDir dir(base);
  // The suite's backend, small segments so rounds switch and release segments.
  Config c = small_config(dir.path() / "log");
  c.segment_size = 64 << 10;
  const std::string config = c.to_string();

  State acked;              // the state after every acknowledged command
  std::vector<Op> pending;  // sent after those, unacknowledged when killed
  for (uint32_t round = 0; round <= rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round) + " in " + dir.path().string());
    Child child(dir.path().string(), config);
    auto ready = child.line();
    ASSERT_TRUE(ready && ready->starts_with("ready ")) << "kvstore did not start";

    // Recovery must give the state after acked + some prefix of pending.
    const State got = read_state(child);
    State candidate = acked;
    bool match = got == candidate;
    size_t applied = 0;  // how many unacknowledged commands the recovered state holds
    for (; applied < pending.size() && !match; ++applied) {
      pending[applied].apply(&candidate);
      match = got == candidate;
    }
    tally->recovered_in_flight += applied;
    ASSERT_TRUE(match) << "recovered state is not acknowledged + a prefix of the " << pending.size()
                       << " unacknowledged commands:\n"
                       << describe_diff(got, acked);
    acked = got;
    pending.clear();
    if (round == rounds) {
      child.send("quit\n");
      EXPECT_EQ(child.wait_exit(), 0);
      break;
    }

    // Commands, pipelined up to `window` ahead of the acknowledgements.
    const size_t total = std::uniform_int_distribution<size_t>(20, 300)(rng);
    const size_t kill_at = std::uniform_int_distribution<size_t>(0, total - 1)(rng);
    const size_t window = std::uniform_int_distribution<size_t>(1, 24)(rng);
    const bool clean = round + 1 == rounds;  // the last killed-free round ends with quit
    std::vector<Op> ops;
    for (size_t i = 0; i < total; ++i) {
      const int roll = std::uniform_int_distribution<int>(0, 99)(rng);
      const std::string key = key_name(std::uniform_int_distribution<int>(0, kKeys - 1)(rng));
      if (roll < 3) {
        ops.push_back({Op::checkpoint, "", "", {}});
      } else if (roll < 15) {
        ops.push_back({Op::del, key, "", {}});
      } else if (roll < 30) {
        // A write batch: a recovered state holding some of its pairs but
        // not all matches no prefix of the commands.
        Op op{Op::mput, "", "", {}};
        const int n = std::uniform_int_distribution<int>(2, 8)(rng);
        for (int j = 0; j < n; ++j) {
          op.pairs.emplace_back(
              key_name(std::uniform_int_distribution<int>(0, kKeys - 1)(rng)),
              "r" + std::to_string(round) + "o" + std::to_string(i) + "m" + std::to_string(j));
        }
        ops.push_back(std::move(op));
      } else {
        std::string v = "r" + std::to_string(round) + "o" + std::to_string(i) + "-";
        v.append(std::uniform_int_distribution<size_t>(0, 300)(rng),
                 static_cast<char>('a' + i % 26));
        ops.push_back({Op::put, key, v, {}});
      }
    }
    size_t sent = 0, done = 0;
    while (done < (clean ? total : kill_at)) {
      while (sent < total && sent - done < window) child.send(ops[sent++].line());
      auto l = child.line();
      ASSERT_TRUE(l.has_value()) << "kvstore stopped answering after " << done << " acks";
      ASSERT_EQ(*l, "ok");
      ops[done++].apply(&acked);
    }
    tally->acked += done;
    if (clean) {
      child.send("quit\n");
      EXPECT_EQ(child.wait_exit(), 0);
    } else {
      child.kill();  // SIGKILL with sent - done commands in flight
      ++tally->kills;
      tally->in_flight += sent - done;
      pending.assign(ops.begin() + static_cast<long>(done), ops.begin() + static_cast<long>(sent));
    }
  }
}

// Puts, then one mput, then quit: the log of a clean session.
State write_batch_session(const std::string& dir, const std::string& config, State* before) {
  Child child(dir, config);
  auto ready = child.line();
  EXPECT_TRUE(ready && *ready == "ready 0");
  State want;
  std::string mput = "mput";
  for (int k = 0; k < 3; ++k) {
    child.send("put " + key_name(k) + " before" + std::to_string(k) + "\n");
    want[key_name(k)] = "before" + std::to_string(k);
  }
  *before = want;
  for (int k = 10; k < 16; ++k) {
    const std::string v = "batch" + std::to_string(k) + std::string(40, 'b');
    mput += " " + key_name(k) + " " + v;
    want[key_name(k)] = v;
  }
  child.send(mput + "\n");
  for (int i = 0; i < 4; ++i) {
    auto l = child.line();
    EXPECT_TRUE(l && *l == "ok") << "reply " << i << ": " << l.value_or("(none)");
  }
  child.send("quit\n");
  EXPECT_EQ(child.wait_exit(), 0);
  return want;
}

// Opens the store in `dir`, reads every key back, quits.
State reopen_state(const std::string& dir, const std::string& config) {
  Child child(dir, config);
  auto ready = child.line();
  EXPECT_TRUE(ready && ready->starts_with("ready ")) << "kvstore did not start on " << dir;
  if (!ready) return {};
  State got = read_state(child);
  child.send("quit\n");
  EXPECT_EQ(child.wait_exit(), 0);
  return got;
}

TEST(KvStore, PutManyIsRecoveredWholeOrNotAtAll) {
  ::signal(SIGPIPE, SIG_IGN);
  TempDir dir;
  {
    auto log = Log::open(small_config(dir.path() / "probe"));
    if (!log && log.error().code == Errc::unsupported) GTEST_SKIP() << log.error().describe();
  }
  Config c = small_config(dir.path() / "log");
  c.segment_size = 64 << 10;
  const std::string config = c.to_string();
  const std::string store = (dir.path() / "store").string();
  State before;
  const State want = write_batch_session(store, config, &before);
  ASSERT_FALSE(HasFailure());
  const Files files = load_segments(std::filesystem::path(store) / "log");

  EXPECT_EQ(reopen_state(store, config), want) << "a clean close must keep the whole batch";

  // The mput must be the log's one batch record; cut the file inside it.
  uint64_t seg_id = 0;
  seg::RecordView batch;
  int batches = 0;
  for (const auto& [id, bytes] : files) {
    const auto image = std::as_bytes(std::span(bytes.data(), bytes.size()));
    for (uint32_t off = seg::kHeaderSize;;) {
      const seg::Decoded d = seg::decode_record(image, id, off);
      if (d.status != seg::Decode::ok || d.record.kind == seg::Kind::end) break;
      if (d.record.kind == seg::Kind::batch) {
        seg_id = id;
        batch = d.record;
        ++batches;
      }
      off += d.record.framed;
    }
  }
  ASSERT_EQ(batches, 1) << "mput must append its pairs as one write batch";
  for (const uint32_t cut : {batch.offset + seg::kRecordHeaderSize, batch.offset + batch.framed / 2,
                             batch.offset + batch.framed - 1}) {
    SCOPED_TRACE("segment " + std::to_string(seg_id) + " cut at " + std::to_string(cut) +
                 " inside the batch at [" + std::to_string(batch.offset) + ", " +
                 std::to_string(batch.offset + batch.framed) + ")");
    TempDir torn;
    Files cut_files = files;
    cut_files.at(seg_id).resize(cut);
    write_segments(torn.path() / "log", cut_files);
    EXPECT_EQ(reopen_state(torn.path().string(), config), before)
        << "a torn batch must recover none of its keys, and every put before it";
  }
}

TEST(KvStore, AcknowledgedPutsSurviveSigkill) {
  ::signal(SIGPIPE, SIG_IGN);
  {  // A backend this machine cannot run is a skip, not a failure.
    TempDir probe;
    auto log = Log::open(small_config(probe.path()));
    if (!log && log.error().code == Errc::unsupported) GTEST_SKIP() << log.error().describe();
  }
  const uint64_t seed = env_or("SYNCLOG_KVSTORE_SEED", 20240917);
  const auto rounds = static_cast<uint32_t>(env_or("SYNCLOG_KVSTORE_ROUNDS", 6));
  std::mt19937_64 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const std::string& base : {disk_base(), std::string("/dev/shm")}) {
    Tally t;
    run_rounds(base, rounds, rng, &t);
    if (HasFatalFailure()) return;
    std::printf(
        "%s: %llu kills, %llu acknowledged commands, %llu in flight at the kills, "
        "%llu of those recovered\n",
        base.c_str(), static_cast<unsigned long long>(t.kills),
        static_cast<unsigned long long>(t.acked), static_cast<unsigned long long>(t.in_flight),
        static_cast<unsigned long long>(t.recovered_in_flight));
  }
}

}  // namespace
}  // namespace synclog::test
