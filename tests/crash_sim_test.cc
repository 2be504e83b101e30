// Crash-state simulation (G1-G3): record a batch-mode run of the backend
// under test through the I/O hook, then rebuild thousands of directories a
// crash (process or power) could have left at random moments, open each
// with Log::open and replay it. See crash_sim.h for the model.
//
// Sizing: SYNCLOG_CRASH_STATES (states per test) and SYNCLOG_CRASH_SECONDS
// (a time cap per test) override the defaults, which are smaller under
// sanitizers. A failing state prints its seed and k, keeps its image and
// saves the recording; SYNCLOG_CRASH_REPLAY=<recording> SYNCLOG_CRASH_K=<k>
// SYNCLOG_CRASH_SEED=<seed> SYNCLOG_CRASH_MODEL=<old-or-new|garbled>
// with --gtest_filter=CrashSim.Reproduce rebuilds and checks exactly it.
// SYNCLOG_CRASH_SAVE_DIR=<dir> saves every recorded run there.
#include "crash_sim.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>

#include "io/hook.h"
#include "test_util.h"

namespace synclog::test {
namespace {

using namespace crash;

constexpr uint64_t kBaseSeed = 0x5eedc0ffee2024ull;
constexpr int kThreads = 4;
constexpr int kAppendsPerThread = 300;
// Latency added before each sync of the recorded run (see Recorder).
constexpr std::chrono::microseconds kSyncDelay{300};

long long env_long(const char* name, long long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 0) : fallback;
}

// States per test, the time cap per test, and the workers that run them.
int states_per_test() {
  return static_cast<int>(env_long("SYNCLOG_CRASH_STATES", kSanitized ? 200 : 2000));
}
double seconds_per_test() {
  return static_cast<double>(env_long("SYNCLOG_CRASH_SECONDS", kSanitized ? 15 : 10));
}
// Under TSan one worker: liburing maps its rings with raw syscalls TSan
// cannot see, so two workers' rings at a reused address look like a race.
int jobs() {
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  return static_cast<int>(
      env_long("SYNCLOG_CRASH_JOBS", kThreadSanitized ? 1 : std::clamp(hw, 2, 4)));
}

// The recorded run: kThreads threads append records of 16..2000 bytes in
// batch mode; every acknowledgement is recorded with its position.
// With `release`, another thread keeps releasing all but the last two
// segments, so released files are recycled (renamed, given a new header,
// renamed again) or deleted while appends go on.
// `rename_sync_delay` stretches each directory fsync that follows a rename.
// Delays a third of the direct write completions by up to 1 ms before the
// Recorder numbers them, so with syncs in flight a later sync often
// completes before an earlier one.
class Jitter : public io::Hook {
 public:
  Jitter(Recorder& recorder, uint64_t seed) : recorder_(recorder), rng_(seed) {}
  int before(const io::Event& e) override { return recorder_.before(e); }
  void after(const io::Event& e) override {
    if (e.op == io::Op::direct_write) {
      uint64_t r = 0;
      {
        std::lock_guard lock(mu_);
        r = rng_();
      }
      if (r % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(r % 1000));
    }
    recorder_.after(e);
  }
  int before_submit() override { return recorder_.before_submit(); }
  int64_t written(const io::Event& e, int64_t bytes) override {
    return recorder_.written(e, bytes);
  }
  int access(const io::Event& e) override { return recorder_.access(e); }

 private:
  Recorder& recorder_;
  std::mutex mu_;
  std::mt19937_64 rng_;
};

Recording record_run(const Config& base, uint64_t seed, bool release = false,
                     std::chrono::microseconds rename_sync_delay = {}, bool jitter = false) {
  TempDir dir;
  Config cfg = base;
  cfg.dir = dir.path();
  Recorder recorder(dir.path(), direct_writes_durable_at_completion(cfg), kSyncDelay,
                    rename_sync_delay);
  Jitter jittered(recorder, seed);
  {
    HookGuard guard(jitter ? static_cast<io::Hook*>(&jittered) : &recorder);
    auto log = Log::open(cfg);
    EXPECT_TRUE(log.has_value()) << log.error().describe();
    if (!log) return recorder.take();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(mix_seed(seed, static_cast<uint64_t>(t)));
        for (int i = 0; i < kAppendsPerThread; ++i) {
          const std::string rec =
              make_record(static_cast<uint32_t>(t), static_cast<uint64_t>(i), 16 + rng() % 1985);
          auto pos = (*log)->append(rec);
          if (!pos) {
            ADD_FAILURE() << "append failed: " << pos.error().describe();
            return;
          }
          recorder.ack(*pos, rec);
        }
      });
    }
    std::atomic<bool> done{false};
    std::thread releaser;
    if (release) {
      releaser = std::thread([&] {
        while (!done.load()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          const Position d = (*log)->durable();
          if (d.segment() < 3) continue;
          const Position floor(d.segment() - 1, 0);
          recorder.release(floor);
          auto r = (*log)->release_before(floor);
          EXPECT_TRUE(r.has_value()) << r.error().describe();
        }
      });
    }
    for (auto& th : threads) th.join();
    done = true;
    if (releaser.joinable()) releaser.join();
    auto closed = (*log)->close();
    EXPECT_TRUE(closed.has_value()) << closed.error().describe();
  }
  Recording rec = recorder.take();
  cfg.dir = "/";  // each crash image gets its own
  rec.config = cfg.to_string();
  if (const char* save = std::getenv("SYNCLOG_CRASH_SAVE_DIR"); save && *save) {
    static std::atomic<int> n{0};
    const auto path = std::filesystem::path(save) / ("recording-" + std::to_string(::getpid()) +
                                                     "-" + std::to_string(n++) + ".rec");
    EXPECT_TRUE(rec.save(path)) << path;
    std::cout << "[crash-sim] recording saved to " << path << std::endl;
  }
  return rec;
}

struct Summary {
  int states = 0;
  int failures = 0;
  int with_unsynced = 0;  // states where some unsynced unit differed from its durable contents
  int with_new = 0;       // ... and at least one was taken new (or garbled)
  int with_names = 0;     // states with directory operations not yet durable
  int with_garbage = 0;   // garbled model: states with garbage in them
  int torn = 0;
  int damaged = 0;
  uint64_t replayed = 0;
  uint64_t end = 0;
  uint64_t required = 0;
  void add(const Summary& o) {
    states += o.states;
    failures += o.failures;
    with_unsynced += o.with_unsynced;
    with_new += o.with_new;
    with_names += o.with_names;
    with_garbage += o.with_garbage;
    torn += o.torn;
    damaged += o.damaged;
    replayed += o.replayed;
    end += o.end;
    required += o.required;
  }
};

// Saves the recording once, the first time a state built from it fails.
class Evidence {
 public:
  explicit Evidence(const Recording& rec) : rec_(rec) {}
  std::string recording_path() {
    std::lock_guard lock(mu_);
    if (path_.empty()) {
      static std::atomic<int> n{0};
      path_ =
          "/tmp/synclog-crash-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".rec";
      if (!rec_.save(path_)) path_ = "(could not save the recording to " + path_ + ")";
    }
    return path_;
  }

 private:
  const Recording& rec_;
  std::mutex mu_;
  std::string path_;
};

// Builds, writes, opens and checks one crash state; false on failure.
bool run_state(const Simulator& sim, const Checker& checker, const Config& base, Model model,
               uint64_t k, uint64_t seed, Summary* sum, Evidence& evidence) {
  SCOPED_TRACE("crash state: model " + std::string(to_string(model)) + ", seed " +
               std::to_string(seed) + ", k " + std::to_string(k) + " of " +
               std::to_string(sim.moments()));
  const CrashImage img = sim.image(k, model, seed);
  TempDir dir;
  std::string err;
  if (!img.write_to(dir.path(), &err)) {
    ADD_FAILURE() << "cannot write the crash image: " << err;
    return false;
  }
  Config cfg = base;
  cfg.dir = dir.path();
  const Verdict v = checker.check(img, cfg);
  ++sum->states;
  sum->with_unsynced += img.dirty_units > 0;
  sum->with_new += img.new_units > 0;
  sum->with_names += img.uncertain_names > 0;
  sum->torn += v.torn_tail;
  sum->damaged += v.damage > 0;
  sum->replayed += v.replayed;
  sum->end += v.end;
  sum->required += v.required;
  sum->with_garbage += !img.garbled.empty();
  if (v.ok) return true;
  ++sum->failures;
  // Keep the evidence: the image as built (Log::open changed the one it
  // opened) and the recording, once per process.
  const std::string keep = "/tmp/synclog-crash-" + std::to_string(::getpid()) + "-k" +
                           std::to_string(k) + "-" + std::to_string(seed);
  std::filesystem::create_directories(keep);
  (void)img.write_to(keep, &err);
  const std::string saved = evidence.recording_path();
  ADD_FAILURE() << v.problem << "\n  " << img.describe() << "\n  image kept in " << keep
                << "\n  reproduce: SYNCLOG_CRASH_REPLAY=" << saved << " SYNCLOG_CRASH_K=" << k
                << " SYNCLOG_CRASH_SEED=" << seed << " SYNCLOG_CRASH_MODEL=" << to_string(model)
                << " ./crash_sim_test --gtest_filter=CrashSim.Reproduce";
  return false;
}

void simulate(const Recording& rec, Model model, uint64_t base_seed, double share = 1.0) {
  auto parsed = Config::parse(rec.config);
  ASSERT_TRUE(parsed.has_value()) << parsed.error().describe();
  ASSERT_EQ(rec.acks.size(), size_t{kThreads * kAppendsPerThread});
  // The run must have exercised what the model is about.
  int renames = 0, dir_syncs = 0, data_syncs = 0;
  for (const auto& e : rec.events) {
    renames += e.op == io::Op::rename;
    dir_syncs += e.op == io::Op::dir_sync;
    data_syncs += e.op == io::Op::msync || e.op == io::Op::datasync ||
                  (e.op == io::Op::direct_write && rec.direct_writes_durable);
  }
  EXPECT_GE(renames, 4) << "expected several segment creations";
  EXPECT_GT(dir_syncs, 0);
  EXPECT_GT(data_syncs, 50);

  const Simulator sim(rec);
  const Checker checker(rec);
  Evidence evidence(rec);
  const int states = static_cast<int>(states_per_test() * share);
  const double cap = seconds_per_test() * share;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  Summary sum;
  std::cout << "[crash-sim] backend " << backend_under_test() << ", model " << to_string(model)
            << ", base seed " << base_seed << ", " << rec.events.size() << " events, "
            << rec.acks.size() << " acks, " << sim.moments() << " moments, " << jobs() << " jobs"
            << std::endl;
  // State i is (seed, k) = (mix_seed(base_seed, i), seed % moments), whichever
  // worker runs it.
  std::atomic<int> next{0};
  std::atomic<bool> capped{false};
  std::mutex mu;
  auto worker = [&] {
    for (;;) {
      const int i = next.fetch_add(1);
      if (i >= states) return;
      {
        std::lock_guard lock(mu);
        if (sum.failures >= 5) return;
      }
      if (elapsed() > cap) {
        capped = true;
        return;
      }
      const uint64_t seed = mix_seed(base_seed, static_cast<uint64_t>(i));
      const uint64_t k = seed % sim.moments();
      Summary one;
      run_state(sim, checker, *parsed, model, k, seed, &one, evidence);
      std::lock_guard lock(mu);
      sum.add(one);
    }
  };
  std::vector<std::thread> workers;
  for (int w = 0; w < jobs(); ++w) workers.emplace_back(worker);
  for (auto& w : workers) w.join();
  if (capped) std::cout << "[crash-sim] time cap of " << cap << " s reached" << std::endl;
  if (sum.failures >= 5)
    ADD_FAILURE() << "stopped after " << sum.failures << " failing crash states";
  std::cout << "[crash-sim] " << sum.states << " crash states in " << elapsed() << " s, "
            << sum.failures << " failed; " << sum.with_unsynced << " had unsynced data ("
            << sum.with_new << " took some new/garbled), " << sum.with_names
            << " had undurable directory ops, " << sum.torn << " torn tails, " << sum.damaged
            << " with damage reports";
  if (model == Model::garbled) {
    std::cout << ", " << sum.with_garbage << " with garbage";
  }
  const uint64_t n = sum.states ? static_cast<uint64_t>(sum.states) : 1;
  std::cout << "; per state on average " << sum.replayed / n
            << " records replayed, ending at append " << sum.end / n
            << " of the log order where G1 required " << sum.required / n << std::endl;
  // Not vacuous: many states had something undecided in them.
  EXPECT_GT(sum.with_new, sum.states / 10);
  EXPECT_GT(sum.with_names, 0);
}

Config run_config() {
  Config cfg = small_config("/");
  cfg.mode = SyncMode::batch;
  return cfg;
}

// The checker itself: a replay that ends, or starts, inside a write batch
// fails, one that takes the batch whole or not at all passes.
TEST(CrashSim, CheckerRefusesAPartialBatch) {
  const Position a(1, 64), b(1, 96), c(1, 128), d(1, 160);
  const std::vector<Ack> order = {Ack{0, a, "a", 0}, Ack{UINT64_MAX, b, "b", b.raw()},
                                  Ack{UINT64_MAX, c, "c", b.raw()}, Ack{UINT64_MAX, d, "d", 0}};
  const Checker chk(order, {});
  const RecoveryReport rep;
  EXPECT_TRUE(chk.verify({{a, "a"}}, 1, rep).ok);
  EXPECT_TRUE(chk.verify({{a, "a"}, {b, "b"}, {c, "c"}}, 1, rep).ok);
  const Verdict torn = chk.verify({{a, "a"}, {b, "b"}}, 1, rep);
  EXPECT_FALSE(torn.ok);
  EXPECT_NE(torn.problem.find("partial batch"), std::string::npos) << torn.problem;
  const Verdict late = chk.verify({{c, "c"}, {d, "d"}}, 1, rep);
  EXPECT_FALSE(late.ok) << "a replay may not begin inside a batch";
}

TEST(CrashSim, OldOrNewSectors) {
  std::cout << "[crash-sim] base seed " << kBaseSeed << std::endl;
  const Recording rec = record_run(run_config(), kBaseSeed);
  simulate(rec, Model::old_or_new, kBaseSeed);
}

TEST(CrashSim, GarbledSectors) {
  std::cout << "[crash-sim] base seed " << kBaseSeed + 1 << std::endl;
  const Recording rec = record_run(run_config(), kBaseSeed + 1);
  simulate(rec, Model::garbled, kBaseSeed + 1);
}

// Released segments are recycled under new ids or deleted during the run.
TEST(CrashSim, RecyclingOldOrNew) {
  std::cout << "[crash-sim] base seed " << kBaseSeed + 2 << std::endl;
  const Recording rec = record_run(run_config(), kBaseSeed + 2, /*release=*/true);
  int recycled = 0;
  for (const auto& e : rec.events)
    recycled += e.op == io::Op::rename && e.to.ends_with(".recycle.tmp");
  EXPECT_GT(recycled, 0) << "the run recycled no segment";
  EXPECT_FALSE(rec.releases.empty());
  simulate(rec, Model::old_or_new, kBaseSeed + 2, 0.5);
}

// Regression test for two bugs this simulation found in
// SegmentManager::release() (now fixed: each rename or unlink is made
// durable, oldest first, before the next, and before a recycled file gets
// its new header). The same run with each directory fsync that follows a
// rename taking 50 ms longer, a legitimate latency, which widened:
//  - the released file is renamed X.seg -> X.recycle.tmp and queued for
//    recycling before the directory fsync; the manager can give it a new
//    header (id Y) and fdatasync it before that fsync. A crash then leaves
//    X.seg holding a header for Y, and Log::open refuses the directory
//    ("header names segment Y").
//  - one call renames/unlinks several segments and then fsyncs the directory
//    once; if only a later segment's change persisted, recovery finds a
//    missing segment and stops there, losing acknowledged records after it
//    (needs a directory whose operations persist out of order, as POSIX
//    allows).
TEST(CrashSim, RecyclingSlowDirectorySync) {
  std::cout << "[crash-sim] base seed " << kBaseSeed + 3 << std::endl;
  Config cfg = run_config();
  cfg.segment_size = 64 << 10;  // more switches, so more recycling inside the windows
  const Recording rec =
      record_run(cfg, kBaseSeed + 3, /*release=*/true, std::chrono::milliseconds(50));
  simulate(rec, Model::old_or_new, kBaseSeed + 3, 0.5);
}

// Pipelined syncs (four in flight; uring and aio only), their write
// completions jittered: whenever a later sync finishes first, durable() and
// every acknowledgement must still stop at the hole, and recovery must never
// take the later sync's intact marker or records as proof past it.
Config pipelined_config() {
  Config cfg = run_config();
  cfg.syncs_in_flight = 4;
  return cfg;
}

bool pipelines() {
  const std::string b = backend_under_test();
  return b == "uring" || b == "aio";
}

// Direct writes that completed before an earlier-started write to a lower
// offset of the same file: syncs finishing out of order.
int out_of_order(const Recording& rec) {
  std::vector<const RecordedEvent*> writes;
  for (const auto& e : rec.events) {
    if (e.op == io::Op::direct_write) writes.push_back(&e);
  }
  int n = 0;
  for (const RecordedEvent* a : writes) {
    for (const RecordedEvent* b : writes) {
      n += a->name == b->name && a->offset < b->offset && a->begin < b->begin && b->end < a->end;
    }
  }
  return n;
}

TEST(CrashSim, PipelinedOldOrNew) {
  if (!pipelines()) GTEST_SKIP() << "syncs_in_flight > 1 is for uring and aio";
  std::cout << "[crash-sim] base seed " << kBaseSeed + 4 << std::endl;
  const Recording rec = record_run(pipelined_config(), kBaseSeed + 4, /*release=*/true, {},
                                   /*jitter=*/true);
  const int reordered = out_of_order(rec);
  std::cout << "[crash-sim] " << reordered << " direct writes finished before an earlier one"
            << std::endl;
  EXPECT_GT(reordered, 10) << "the syncs never finished out of order";
  simulate(rec, Model::old_or_new, kBaseSeed + 4, 0.5);
}

TEST(CrashSim, PipelinedGarbled) {
  if (!pipelines()) GTEST_SKIP() << "syncs_in_flight > 1 is for uring and aio";
  std::cout << "[crash-sim] base seed " << kBaseSeed + 5 << std::endl;
  const Recording rec =
      record_run(pipelined_config(), kBaseSeed + 5, /*release=*/false, {}, /*jitter=*/true);
  EXPECT_GT(out_of_order(rec), 10) << "the syncs never finished out of order";
  simulate(rec, Model::garbled, kBaseSeed + 5, 0.5);
}

// One recorded state, rebuilt from a saved recording (see the top).
TEST(CrashSim, Reproduce) {
  const char* path = std::getenv("SYNCLOG_CRASH_REPLAY");
  if (path == nullptr || *path == '\0')
    GTEST_SKIP() << "set SYNCLOG_CRASH_REPLAY to reproduce a state";
  Recording rec;
  ASSERT_TRUE(Recording::load(path, &rec)) << "cannot read recording " << path;
  auto parsed = Config::parse(rec.config);
  ASSERT_TRUE(parsed.has_value()) << parsed.error().describe();
  const char* model_name = std::getenv("SYNCLOG_CRASH_MODEL");
  const Model model =
      model_name && std::string(model_name) == "garbled" ? Model::garbled : Model::old_or_new;
  const uint64_t k = static_cast<uint64_t>(env_long("SYNCLOG_CRASH_K", 0));
  const char* seed_text = std::getenv("SYNCLOG_CRASH_SEED");
  const uint64_t seed = seed_text ? std::strtoull(seed_text, nullptr, 0) : 0;
  const Simulator sim(rec);
  const Checker checker(rec);
  Summary sum;
  Evidence evidence(rec);
  EXPECT_TRUE(run_state(sim, checker, *parsed, model, k, seed, &sum, evidence));
}

}  // namespace
}  // namespace synclog::test
