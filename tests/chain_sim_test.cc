// Crash-restart chains (G7): histories of several sessions on one log, each
// ending in a simulated crash, each later session opening what the crash
// left. A session opens the log (recovery runs and writes under the hook),
// replays, appends from several threads in batch, group or periodic mode
// (with sync()), releases and recycles segments, and closes; the crash that
// ends it is a moment k anywhere in its recorded I/O, recovery's own writes
// included. Either kind of crash may end a session: a power loss (only what
// was durable stays, sectors or pages old, new or garbled) or a process
// crash (the page cache stays, none of it durable yet). The next session is
// recorded on the state the crash left, with that state's durable and
// volatile parts carried into its recording (crash::with_base), so a power
// loss in a later session can still take away what an earlier crashed
// process left only in the page cache.
//
// The oracle is cumulative: every record any session acknowledged before
// its crash, and everything a later session replayed and built on, must
// replay intact and in order at every later open; nothing replays that was
// not appended. Every session's open is checked, and the last session's
// crash is sampled at many moments.
//
// Some single-record appends (blocking or async) are large: above
// Config::max_unfragmented_size(), up to max_record (three segments),
// written as fragments across segments. They are acknowledged like any
// other record and must replay whole or, unacknowledged, not at all.
//
// At a session boundary that allows it, another log's file of the same id
// replaces the lowest segment (an operator's copy; path 7 in
// docs/durability.md). Its records count as released, and every later open
// runs recovery=skip-damaged, which may report that file and nothing else.
//
// Sizing: SYNCLOG_CHAIN_HISTORIES, SYNCLOG_CHAIN_SESSIONS and
// SYNCLOG_CHAIN_STATES (final crash states per history) override the
// defaults; SYNCLOG_CHAIN_SEED the base seed. `./dev chains` runs the long
// campaign.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <thread>

#include "crash_sim.h"
#include "fail_nth_sync.h"
#include "io/hook.h"
#include "segments/segment.h"
#include "signal_storm.h"
#include "test_util.h"

namespace synclog::test {
namespace {

using namespace crash;

constexpr std::chrono::microseconds kSyncDelay{200};

long long env_long(const char* name, long long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 0) : fallback;
}

// Under TSan one worker: liburing maps its rings with raw syscalls TSan
// cannot see, so two workers' rings at a reused address look like a race.
int jobs() { return static_cast<int>(env_long("SYNCLOG_CHAIN_JOBS", kThreadSanitized ? 1 : 2)); }

// How the workload's threads append: one record per blocking append(); one
// per append_async(), acknowledged by its completion; write batches of 1 to
// 5 records by append_batch(); or batches by append_batch_async().
enum class Api { blocking, async, batch, async_batch };
const char* to_string(Api a) {
  switch (a) {
    case Api::blocking:
      return "append";
    case Api::async:
      return "async";
    case Api::batch:
      return "batches";
    case Api::async_batch:
      return "async-batches";
  }
  return "?";
}

struct Workload {
  SyncMode mode = SyncMode::batch;
  Api api = Api::blocking;
  bool release = false;
  int threads = 3;
  int appends = 50;              // calls per thread
  int fail_sync = 0;             // > 0: the n-th data sync after open fails with EIO
  uint32_t syncs_in_flight = 1;  // > 1: pipelined syncs (direct backends, batch mode)
  // Above 0: some single-record appends (append, append_async) are larger
  // than `whole` (Config::max_unfragmented_size()), up to `max_record`, and
  // go in as fragments across segments.
  uint64_t whole = 0;
  uint64_t max_record = 0;
  bool large() const { return max_record > whole && whole > 0; }
};

std::string describe(const Workload& w) {
  return std::string(to_string(w.mode)) + (w.release ? "+release" : "") + " " +
         std::to_string(w.threads) + "x" + std::to_string(w.appends) + " " + to_string(w.api) +
         (w.syncs_in_flight > 1 ? ", " + std::to_string(w.syncs_in_flight) + " syncs in flight"
                                : "") +
         (w.fail_sync > 0 ? ", data sync " + std::to_string(w.fail_sync) + " fails" : "") +
         (w.large() && (w.api == Api::blocking || w.api == Api::async)
              ? ", some records up to " + std::to_string(w.max_record) + " bytes"
              : "");
}

// What a session's appends saw when a sync may fail. Completions run on one
// thread in position order, so once one reports the failure every later one
// must too, and each async append gets exactly one.
struct Outcomes {
  explicit Outcomes(bool faulty) : faulty(faulty) {}
  const bool faulty;  // a data sync is made to fail: errors are allowed
  std::mutex mu;
  std::vector<std::shared_ptr<std::atomic<int>>>
      calls;                                   // per async append that returned a position
  std::atomic<bool> failed{false};             // an error was reported
  std::atomic<uint64_t> error_completions{0};  // on the completion thread only
  std::atomic<uint64_t> success_after_error{0};
  std::atomic<uint64_t> large_appended{0};  // large records append returned a position for
  // The records of each call that ended in an error: they may replay, never
  // required. With their positions where the call returned them.
  struct Unacked {
    std::shared_ptr<const std::vector<std::string>> recs;
    std::vector<Position> at;  // empty: the append itself failed
  };
  std::vector<Unacked> unacked;

  void not_acked(std::shared_ptr<const std::vector<std::string>> recs,
                 std::vector<Position> at = {}) {
    std::lock_guard lock(mu);
    unacked.push_back(Unacked{std::move(recs), std::move(at)});
  }

  // An append, sync or release error: allowed only where a sync fails.
  void error(const char* what, const Error& e) {
    failed = true;
    EXPECT_TRUE(faulty) << what << " failed: " << e.describe();
  }
};

// The recorder, and one failing data sync once armed (after open, so that
// recovery's own syncs run): the failed operation is not done, so the
// recorder never sees it and what it would have made durable stays volatile.
class RecordAndFail : public io::Hook {
 public:
  RecordAndFail(Recorder& recorder, int n) : recorder_(recorder), fail_(n) {}
  void arm() { armed_ = true; }
  int before(const io::Event& e) override {
    if (armed_.load()) {
      if (const int err = fail_.before(e)) return err;
    }
    return recorder_.before(e);
  }
  void after(const io::Event& e) override { recorder_.after(e); }

 private:
  Recorder& recorder_;
  FailNthSync fail_;
  std::atomic<bool> armed_{false};
};

struct Session {
  Recording rec;       // with the earlier state as its base
  uint64_t shift = 0;  // moments before the session's first own event
  bool opened = false;
  bool failed = false;  // the log reported a failed sync
  uint64_t error_completions = 0;
  uint64_t large_appended = 0;  // records above max_unfragmented_size() appended
  uint64_t large_acked = 0;     // and acknowledged
  std::string open_error;
  Replay replayed;
  RecoveryReport report;
};

// One thread's appends. Blocking calls are acknowledged when they return
// (batch, group) or when the following sync() returns (periodic); async
// ones when their completion reports success, so a completion that fires
// before its record is durable is caught at the crash moments after it.
void append_some(Log& log, Recorder& recorder, Outcomes& out, const Workload& w, uint64_t seed,
                 uint32_t lane) {
  std::mt19937_64 rng(seed);
  // Which records are large, and their sizes, are drawn apart from `rng`,
  // so the workload's other choices stay as they were before there were
  // large records.
  std::mt19937_64 big(mix_seed(seed, 400));
  std::vector<std::pair<std::vector<Position>, std::vector<std::string>>> unsynced;
  const bool batches = w.api == Api::batch || w.api == Api::async_batch;
  const bool async = w.api == Api::async || w.api == Api::async_batch;
  for (int i = 0; i < w.appends; ++i) {
    const int n = batches ? 1 + static_cast<int>(rng() % 5) : 1;
    auto recs = std::make_shared<std::vector<std::string>>();
    bool large = false;
    for (int j = 0; j < n; ++j) {
      // Some records inside batches are empty (a call's first record never
      // is: add_unacked() finds a call by it).
      if (j > 0 && rng() % 6 == 0) {
        recs->emplace_back();
        continue;
      }
      size_t size = 16 + rng() % (batches ? 400 : 1500);
      // One single-record append in 100 is large, fragments across up to
      // five segments: often just past the unfragmented limit or at
      // max_record. (Each adds segments to every crash image: the suite's
      // time budget keeps them few.)
      if (!batches && w.large() && big() % 100 == 0) {
        large = true;
        const uint64_t span = w.max_record - w.whole;  // sizes whole+1 .. max_record
        switch (big() % 8) {
          case 0:
          case 1:
          case 2:
            size = w.whole + 1 + big() % std::min<uint64_t>(span, 64);
            break;
          case 3:
            size = w.max_record - big() % std::min<uint64_t>(span, 64);
            break;
          default:
            size = w.whole + 1 + big() % span;
            break;
        }
      }
      recs->push_back(make_record(lane, static_cast<uint64_t>(i * 8 + j), size));
    }
    std::vector<std::string_view> views(recs->begin(), recs->end());
    Result<std::vector<Position>> at;
    if (async) {
      auto positions = std::make_shared<std::vector<Position>>();
      auto ready = std::make_shared<std::promise<void>>();
      std::shared_future<void> known = ready->get_future().share();
      auto calls = std::make_shared<std::atomic<int>>(0);
      Log::Completion done = [&recorder, &out, recs, positions, known, calls](Result<Position> r) {
        known.wait();  // the positions are stored before the call returns them
        ++*calls;
        if (!r) {
          out.error("a completion", r.error());
          ++out.error_completions;
          out.not_acked(recs, *positions);
          return;
        }
        if (out.error_completions.load() > 0) ++out.success_after_error;
        EXPECT_EQ(*r, positions->front());
        recorder.ack_batch(*positions, *recs);
      };
      if (batches) {
        at = log.append_batch_async(views, std::move(done));
      } else {
        auto pos = log.append_async(views[0], std::move(done));
        if (pos)
          at = std::vector<Position>{*pos};
        else
          at = std::unexpected(pos.error());
      }
      if (at) {
        *positions = *at;
        std::lock_guard lock(out.mu);
        out.calls.push_back(calls);  // an append that failed arranges no completion
      }
      ready->set_value();
    } else if (batches) {
      at = log.append_batch(views);
    } else {
      auto pos = log.append(views[0]);
      if (pos)
        at = std::vector<Position>{*pos};
      else
        at = std::unexpected(pos.error());
    }
    if (!at) {
      out.error("append", at.error());
      out.not_acked(recs);
      // So do the appends before it that no sync() acknowledged yet
      // (periodic mode): they have positions, and may replay.
      for (auto& [p, bytes] : unsynced) {
        out.not_acked(std::make_shared<const std::vector<std::string>>(std::move(bytes)), p);
      }
      return;  // an append error ends this writer: later appends could not be ordered
    }
    if (large) ++out.large_appended;
    if (async) continue;
    if (w.mode != SyncMode::periodic) {
      recorder.ack_batch(*at, *recs);
      continue;
    }
    unsynced.emplace_back(std::move(*at), std::move(*recs));
    if (unsynced.size() == 8 || i + 1 == w.appends) {
      auto s = log.sync();
      if (!s) {
        out.error("sync", s.error());
        for (auto& [p, bytes] : unsynced) {
          out.not_acked(std::make_shared<const std::vector<std::string>>(std::move(bytes)), p);
        }
        return;
      }
      for (auto& [p, bytes] : unsynced) recorder.ack_batch(p, bytes);
      unsynced.clear();
    }
  }
}

// Appends from `w.threads` threads while, if the workload says so, another
// releases what is durable.
void run_workload(Log& log, Recorder& recorder, Outcomes& out, const Workload& w, uint64_t seed,
                  uint32_t session) {
  std::vector<std::thread> threads;
  for (int t = 0; t < w.threads; ++t) {
    threads.emplace_back([&, t] {
      append_some(log, recorder, out, w, mix_seed(seed, static_cast<uint64_t>(t)),
                  (session << 8) | static_cast<uint32_t>(t));
    });
  }
  std::atomic<bool> done{false};
  std::thread releaser;
  if (w.release) {
    releaser = std::thread([&] {
      while (!done.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        const Position d = log.durable();
        if (d.segment() < 3) continue;
        const Position floor(d.segment() - 1, 0);
        recorder.release(floor);
        auto r = log.release_before(floor);
        if (!r) out.error("release_before", r.error());
      }
    });
  }
  for (auto& th : threads) th.join();
  done = true;
  if (releaser.joinable()) releaser.join();
}

// Appends that ended in an error may still replay: their records were
// written. Each goes into the recording as appended, never acknowledged, at
// the position the call returned; a blocking one that failed returned none,
// so where it landed is learnt from what the session left in the page cache
// (a copy of its files, opened with no hook). Only then: a record the
// session released before it closed is gone from that copy, though an
// earlier crash may leave it (an unacknowledged record can be durable when
// a later sync fails, and so released).
void add_unacked(const Config& cfg, const std::vector<Outcomes::Unacked>& calls, Recording* rec) {
  std::map<std::string_view, size_t> first_of;  // a call's first record -> its record count
  for (const auto& [recs, at] : calls) {
    if (at.empty()) {
      first_of[recs->front()] = recs->size();
      continue;
    }
    for (size_t i = 0; i < at.size(); ++i) {
      rec->acks.push_back(Ack{UINT64_MAX, at[i], (*recs)[i], at.front().raw()});
    }
  }
  if (first_of.empty()) return;
  TempDir copy;
  {
    SignalShelter shelter;
    std::filesystem::copy(cfg.dir, copy.path(), std::filesystem::copy_options::recursive);
  }
  Config c = cfg;
  c.dir = copy.path();
  c.recovery = RecoveryMode::skip_damaged;
  auto log = Log::open(c);
  ASSERT_TRUE(log.has_value()) << "the failed session's files: " << log.error().describe();
  uint64_t batch = 0;
  size_t left = 0;  // records of the current call still to come
  for (auto& r : read_all(**log)) {
    if (left == 0) {
      const auto it = first_of.find(r.data);
      if (it == first_of.end()) continue;
      batch = r.position.raw();
      left = it->second;
    }
    rec->acks.push_back(Ack{UINT64_MAX, r.position, std::move(r.data), batch});
    --left;
  }
  EXPECT_TRUE((*log)->close().has_value());
}

// Records one session on the visible part of `base` (empty for the first).
Session record_session(const Config& base_cfg, const std::vector<StateFile>& base,
                       const Workload& w, uint64_t seed, uint32_t index) {
  Session out;
  TempDir dir;
  {
    CrashImage visible;
    for (const auto& f : base) {
      if (!f.visible_name.empty()) visible.files[f.visible_name] = f.visible;
    }
    std::string err;
    EXPECT_TRUE(visible.write_to(dir.path(), &err)) << err;
  }
  Config cfg = base_cfg;
  cfg.dir = dir.path();
  cfg.mode = w.mode;
  if (w.mode == SyncMode::periodic) cfg.interval = std::chrono::milliseconds(2);
  if (w.mode == SyncMode::group) cfg.window = std::chrono::microseconds(300);
  cfg.syncs_in_flight = w.syncs_in_flight;
  Recorder recorder(dir.path(), direct_writes_durable_at_completion(cfg), kSyncDelay);
  RecordAndFail hook(recorder, w.fail_sync);
  Outcomes outcomes(w.fail_sync > 0);
  {
    HookGuard guard(&hook);
    auto log = Log::open(cfg);
    if (!log) {
      out.open_error = log.error().describe();
    } else {
      out.opened = true;
      out.report = (*log)->recovery();
      for (auto& r : read_all(**log)) out.replayed.emplace_back(r.position, std::move(r.data));
      if (w.fail_sync > 0) hook.arm();
      run_workload(**log, recorder, outcomes, w, seed, index);
      auto closed = (*log)->close();
      if (!closed) outcomes.error("close", closed.error());
    }
  }
  // close() completed or failed every pending append, once each.
  for (size_t i = 0; i < outcomes.calls.size(); ++i) {
    EXPECT_EQ(outcomes.calls[i]->load(), 1) << "async append " << i << " of the session";
  }
  EXPECT_EQ(outcomes.success_after_error.load(), 0u)
      << "completions reported success after one reported the failure";
  out.failed = outcomes.failed.load();
  out.error_completions = outcomes.error_completions.load();
  out.large_appended = outcomes.large_appended.load();
  Recording rec = recorder.take();
  for (const Ack& a : rec.acks) out.large_acked += a.bytes.size() > cfg.max_unfragmented_size();
  if (outcomes.failed) add_unacked(cfg, outcomes.unacked, &rec);
  cfg.dir = "/";
  rec.config = cfg.to_string();
  out.rec = with_base(base, std::move(rec), &out.shift);
  return out;
}

struct Totals {
  uint64_t histories = 0;
  uint64_t sessions = 0;
  uint64_t states = 0;  // crash states opened and checked (each session's open included)
  uint64_t process_crashes = 0;
  uint64_t power_losses = 0;
  uint64_t acked = 0;              // acknowledgements recorded
  uint64_t checked = 0;            // required records checked present, summed over states
  uint64_t foreign_swaps = 0;      // session boundaries where another log's file was put in
  uint64_t failed_sessions = 0;    // sessions whose log failed at an injected sync failure
  uint64_t error_completions = 0;  // async appends completed with that failure
  uint64_t large_appended = 0;     // records above max_unfragmented_size() appended
  uint64_t large_acked = 0;        // of those, acknowledged
  uint64_t large_checked = 0;      // required large records checked present, summed over states
  uint64_t compressed = 0;         // histories whose sessions compress records (lz4 or zstd)
  uint64_t encrypted = 0;          // histories whose sessions encrypt records
  uint64_t failures = 0;
};

// How many of the records a state of moment k had to replay (a verdict's
// `required`, past the released segments) are fragmented ones.
uint64_t large_required(const Checker& chk, uint64_t k, uint64_t required, uint64_t whole) {
  const uint64_t floor = chk.floor_segment(k);
  uint64_t count = 0;
  for (size_t i = 0; i < required && i < chk.order().size(); ++i) {
    const Ack& a = chk.order()[i];
    count += a.position.segment() >= floor && a.bytes.size() > whole;
  }
  return count;
}

// The oracle for the session after `s`, given the checker of the state it
// opened (`prev`, at moment `prev_k`) and what its open replayed.
struct Oracle {
  std::vector<Ack> order;
  std::vector<std::pair<uint64_t, Position>> releases;
};

Oracle next_oracle(const Oracle* prev, uint64_t prev_k, const Verdict* v, const Session& s) {
  Oracle o;
  if (prev != nullptr) {
    const uint64_t floor = Checker(prev->order, prev->releases).floor_segment(prev_k);
    // Released records before what this session replayed may come back
    // while their unlink is not durable: allowed, never required.
    for (const Ack& a : prev->order) {
      if (a.position.segment() < floor &&
          (s.replayed.empty() || a.position < s.replayed.front().first)) {
        o.order.push_back(Ack{UINT64_MAX, a.position, a.bytes, a.batch});
      }
    }
    for (const auto& [seq, pos] : prev->releases) {
      if (seq < prev_k) o.releases.emplace_back(0, pos);
    }
    // A replayed batch stays one: a later crash must not split it either.
    std::map<Position, uint64_t> batch_of;
    for (const Ack& a : prev->order) batch_of[a.position] = a.batch;
    const size_t start = v->end - s.replayed.size();
    for (size_t i = 0; i < s.replayed.size(); ++i) {
      const bool required = start + i < v->required;
      const auto b = batch_of.find(s.replayed[i].first);
      o.order.push_back(Ack{required ? 0 : UINT64_MAX, s.replayed[i].first, s.replayed[i].second,
                            b == batch_of.end() ? 0 : b->second});
    }
  }
  for (const Ack& a : s.rec.acks) o.order.push_back(a);
  for (const auto& r : s.rec.releases) o.releases.push_back(r);
  return o;
}

std::string keep_evidence(const CrashImage& img, const std::string& tag) {
  const std::string keep = "/tmp/synclog-chain-" + std::to_string(::getpid()) + "-" + tag;
  std::filesystem::create_directories(keep);
  std::string err;
  (void)img.write_to(keep, &err);
  return keep;
}

std::string save_recording(const Recording& rec, const std::string& tag) {
  const std::string path = "/tmp/synclog-chain-" + std::to_string(::getpid()) + "-" + tag + ".rec";
  return rec.save(path) ? path : "(could not save " + path + ")";
}

Config chain_config() {
  Config cfg = small_config("/");
  cfg.segment_size = 64 << 10;  // several segments per session: switches, releases
  // Records up to three segments (fragmented past half of one), where the
  // size limit, if any, leaves room for them.
  Config large = cfg;
  large.max_record = 3 * cfg.segment_size;
  if (large.validate().has_value() || !cfg.validate().has_value()) cfg = large;
  return cfg;
}

// Another log, written once per process: its files carry their own log id
// but the chain's format, segment size and kind, so its file N is what an
// operator copying "segment N" in from the wrong directory would bring.
const Files& foreign_log() {
  static const Files files = [] {
    TempDir dir;
    Config cfg = chain_config();
    cfg.dir = dir.path();
    cfg.mode = SyncMode::periodic;
    auto log = Log::open(cfg);
    EXPECT_TRUE(log.has_value()) << log.error().describe();
    if (!log) return Files{};
    // No session of a history gets near 40 segments.
    for (uint64_t i = 0;; ++i) {
      auto pos = (*log)->append(make_record(0xF0F0, i, 16 + i * 7 % 1500));
      EXPECT_TRUE(pos.has_value()) << pos.error().describe();
      if (!pos || pos->segment() >= 40) break;
    }
    auto closed = (*log)->close();
    EXPECT_TRUE(closed.has_value()) << closed.error().describe();
    return load_segments(dir.path());
  }();
  return files;
}

// The segments holding the run of records an open of a state of moment k
// must replay (the Checker's G1): from the first record past the released
// segments to the last one acknowledged before k. Recovery keeps them all.
// A fragmented record counts for the segment it starts in only: fewer held
// segments, so fewer swaps, never one that costs the genuine majority.
std::set<uint64_t> held_segments(const Oracle& o, uint64_t k) {
  const Checker chk(o.order, o.releases);
  const uint64_t floor = chk.floor_segment(k);
  Position last;  // before every record: none required
  for (const Ack& a : chk.order()) {
    if (a.seq < k && a.position.segment() >= floor) last = a.position;
  }
  std::set<uint64_t> held;
  for (const Ack& a : chk.order()) {
    if (a.position.segment() >= floor && a.position <= last) held.insert(a.position.segment());
  }
  return held;
}

// The file of a crash state another log's file may replace: the lowest-id
// segment, durable names counted (a file whose rename or unlink is not
// durable comes back under its old name after a later power loss: below
// the foreign file, where the session record that explained its unwritten
// tail was), if it is a durable entry, the foreign log has that id, and two
// other segments are `held`, so the genuine log id keeps a majority of the
// headers whatever a later crash leaves (a tie is refused by design).
// Counting the files there is not enough: the next open discards those
// past the log's end, and a crash before it creates a new one leaves a tie.
// Its id, or 0 where none may.
uint64_t swappable(const std::vector<StateFile>& state, const std::set<uint64_t>& held) {
  const StateFile* lowest = nullptr;
  uint64_t id = 0;
  for (const StateFile& f : state) {
    for (const std::string* name : {&f.visible_name, &f.durable_name}) {
      uint64_t n = 0;
      if (!seg::parse_segment_file_name(*name, &n)) continue;
      if (lowest == nullptr || n < id) {
        lowest = &f;
        id = n;
      }
    }
  }
  if (lowest == nullptr || lowest->durable_name != lowest->visible_name ||
      held.size() - held.count(id) < 2 || foreign_log().count(id) == 0) {
    return 0;
  }
  return id;
}

// One history; false if some state failed (reported with ADD_FAILURE).
bool run_history(const Config& base_cfg, uint64_t seed, int sessions, int final_states,
                 Totals* totals) {
  std::mt19937_64 rng(seed);
  // The default recovery mode refuses another log's file (bad_directory):
  // once one is in, every open skips it.
  Config cfg = base_cfg;
  uint64_t foreign = 0;  // the segment replaced by another log's, if any
  std::vector<StateFile> base;
  Oracle oracle;
  std::optional<Oracle> prev;
  uint64_t prev_k = 0;
  std::string trail = "history seed " + std::to_string(seed) + ":";
  ++totals->histories;
  {
    // Record transforms, one history in three each, drawn apart from `rng`
    // so the history's other choices stay as they were without them. The
    // checks are the same: every acknowledged record back, byte for byte.
    std::mt19937_64 t(mix_seed(seed, 400));
    const uint64_t c = t() % 6;
    if (c < 2) cfg.compression = c == 0 ? Compression::lz4 : Compression::zstd;
    if (t() % 3 == 0) {
      cfg.encryption = Encryption::aes_256_gcm;
      cfg.encryption_keys = [](std::optional<uint32_t> id) -> Result<EncryptionKey> {
        EncryptionKey k;
        k.id = 1;
        for (size_t i = 0; i < k.bytes.size(); ++i) k.bytes[i] = static_cast<std::byte>(i + 1);
        if (id && *id != 1) return make_error(Errc::invalid_argument, "unknown key id");
        return k;
      };
    }
    totals->compressed += cfg.compression != Compression::none;
    totals->encrypted += cfg.encryption != Encryption::none;
    trail += std::string(" compression=") + to_string(cfg.compression) +
             ", encryption=" + to_string(cfg.encryption) + ";";
  }
  for (int s = 0; s < sessions; ++s) {
    Workload w;
    w.whole = cfg.max_unfragmented_size();
    w.max_record = cfg.max_record_size();
    const int m = static_cast<int>(rng() % 3);
    w.mode = m == 0 ? SyncMode::batch : m == 1 ? SyncMode::group : SyncMode::periodic;
    w.release = rng() % 2 == 0;
    w.api = static_cast<Api>(rng() % 4);
    {
      // Drawn apart from `rng`, so the history's other choices stay as
      // they were before sessions could fail.
      std::mt19937_64 f(mix_seed(seed, 200 + static_cast<uint64_t>(s)));
      if (f() % 4 == 0) {
        w.fail_sync = 1 + static_cast<int>(f() % 20);
        // Mostly with completions pending when the sync fails.
        if (f() % 3 != 0) w.api = f() % 2 == 0 ? Api::async : Api::async_batch;
      }
    }
    {
      // Also apart from `rng`: half of the direct backends' batch-mode
      // sessions pipeline their syncs.
      std::mt19937_64 p(mix_seed(seed, 300 + static_cast<uint64_t>(s)));
      const bool direct = cfg.backend == BackendKind::uring || cfg.backend == BackendKind::aio;
      if (direct && w.mode == SyncMode::batch && p() % 2 == 0) w.syncs_in_flight = 4;
    }
    Session sess = record_session(cfg, base, w, mix_seed(seed, 100 + s), static_cast<uint32_t>(s));
    ++totals->sessions;
    totals->failed_sessions += sess.failed ? 1 : 0;
    totals->error_completions += sess.error_completions;
    totals->large_appended += sess.large_appended;
    totals->large_acked += sess.large_acked;
    trail += " session " + std::to_string(s + 1) + " (" + describe(w) + ")";
    if (!sess.opened) {
      ++totals->failures;
      ADD_FAILURE() << trail << ": Log::open of a valid crash state failed: " << sess.open_error;
      return false;
    }
    Verdict v;
    v.end = sess.replayed.size();
    if (prev) {
      Checker chk(prev->order, prev->releases);
      if (foreign != 0) chk.allow_foreign_segment(foreign);
      v = chk.verify(sess.replayed, prev_k, sess.report);
      ++totals->states;
      totals->checked += v.required;
      totals->large_checked += large_required(chk, prev_k, v.required, w.whole);
      if (!v.ok) {
        ++totals->failures;
        ADD_FAILURE() << trail << ": its open replayed wrongly: " << v.problem;
        return false;
      }
    }
    oracle = next_oracle(prev ? &*prev : nullptr, prev_k, &v, sess);
    totals->acked += sess.rec.acks.size();
    const Simulator sim(sess.rec);
    Checker chk(oracle.order, oracle.releases);
    if (foreign != 0) chk.allow_foreign_segment(foreign);
    auto pick = [&](uint64_t* k, Crash* crash, Model* model) {
      *k = sess.shift + rng() % (sim.moments() - sess.shift);
      *crash = rng() % 2 == 0 ? Crash::power : Crash::process;
      *model = rng() % 2 == 0 ? Model::old_or_new : Model::garbled;
      ++(*crash == Crash::power ? totals->power_losses : totals->process_crashes);
    };
    if (s + 1 < sessions) {
      uint64_t k;
      Crash crash;
      Model model;
      pick(&k, &crash, &model);
      const uint64_t img_seed = rng();
      CrashImage img = sim.image(k, model, img_seed, crash);
      // Every boundary that allows it gets another log's file, with no
      // draw: `rng`'s sequence, so the history's other choices, stay as they
      // were. With 3 sessions that is a third to two thirds of the
      // histories (a first session spans three segments only with large
      // records). One per history: two would need more genuine files to
      // keep the majority.
      uint64_t swap = foreign == 0 ? swappable(img.state, held_segments(oracle, k)) : 0;
      trail += " ended by a " + std::string(to_string(crash)) + " (" + to_string(model) +
               ") at k=" + std::to_string(k) + " of " + std::to_string(sim.moments()) +
               " (session from " + std::to_string(sess.shift) + "), image seed " +
               std::to_string(img_seed) + ";";
      prev = oracle;
      prev_k = k;
      if (swap != 0) {
        foreign = swap;
        const auto bytes = std::as_bytes(std::span(foreign_log().at(foreign)));
        for (StateFile& f : img.state) {
          if (f.visible_name != seg::segment_file_name(foreign)) continue;
          f.durable.assign(bytes.begin(), bytes.end());  // an operator copied a synced file in
          f.visible = f.durable;
        }
        // The copy took the genuine segment's records for good: released
        // (replay may start past it), and gone from the order (none can
        // replay, even when an older released file comes back).
        prev->releases.emplace_back(0, Position(foreign + 1, 0));
        std::erase_if(prev->order, [&](const Ack& a) { return a.position.segment() == foreign; });
        cfg.recovery = RecoveryMode::skip_damaged;
        ++totals->foreign_swaps;
        trail += " segment " + std::to_string(foreign) +
                 " replaced by another log's, recovery=skip-damaged from here;";
      }
      base = std::move(img.state);
      continue;
    }
    // The last session: many crash moments, each opened and checked (the
    // choices drawn first, so the result does not depend on the workers).
    struct Pick {
      uint64_t k, seed;
      Crash crash;
      Model model;
    };
    std::vector<Pick> picks(static_cast<size_t>(final_states));
    for (auto& p : picks) {
      pick(&p.k, &p.crash, &p.model);
      p.seed = rng();
    }
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    std::mutex mu;
    auto worker = [&] {
      for (size_t i; (i = next.fetch_add(1)) < picks.size() && !failed.load();) {
        const Pick& p = picks[i];
        const CrashImage img = sim.image(p.k, p.model, p.seed, p.crash);
        TempDir dir;
        std::string err;
        if (!img.write_to(dir.path(), &err)) {
          ADD_FAILURE() << "cannot write the crash image: " << err;
          failed = true;
          return;
        }
        Config c = cfg;
        c.dir = dir.path();
        const Verdict fv = chk.check(img, c);
        std::lock_guard lock(mu);
        ++totals->states;
        totals->checked += fv.required;
        totals->large_checked += large_required(chk, p.k, fv.required, w.whole);
        if (!fv.ok && !failed.exchange(true)) {
          ++totals->failures;
          ADD_FAILURE() << trail << " final " << to_string(p.crash) << " (" << to_string(p.model)
                        << ") at k=" << p.k << " of " << sim.moments() << " (session from "
                        << sess.shift << "), image seed " << p.seed << ": " << fv.problem << "\n  "
                        << img.describe() << "\n  image kept in "
                        << keep_evidence(img, std::to_string(seed) + "-" + std::to_string(i))
                        << "\n  the last session's recording saved to "
                        << save_recording(sess.rec, std::to_string(seed));
        }
      }
    };
    std::vector<std::thread> workers;
    for (int j = 0; j < jobs(); ++j) workers.emplace_back(worker);
    for (auto& th : workers) th.join();
    if (failed) return false;
  }
  return true;
}

// Path 1: a process crash, a restart that acknowledges new appends, then a
// power loss. The crashed process's appends were only in the page cache
// when the second session replayed them and wrote its markers past them;
// unless the second session made them durable first, a power loss leaves a
// gap under its markers and the next open drops its acknowledged records.
TEST(ChainSim, Path1_ProcessCrashRestartThenPowerLoss) {
  Config cfg = small_config("/");
  cfg.segment_size = 64 << 10;
  // Direct writes are in the page cache's place only under a volatile
  // device cache with fdatasync, which is what this models for them.
  if (cfg.segment_kind == SegmentKind::direct) cfg.direct_sync = DirectSync::fdatasync;
  // Session 1: appends that no sync covers until close.
  Recording first;
  {
    TempDir dir;
    Config c = cfg;
    c.dir = dir.path();
    c.mode = SyncMode::periodic;
    c.interval = std::chrono::hours(1);
    c.lag_bound = std::chrono::hours(1);
    Recorder recorder(dir.path(), false);
    {
      HookGuard guard(&recorder);
      auto log = Log::open(c);
      ASSERT_TRUE(log.has_value()) << log.error().describe();
      for (int i = 0; i < 120; ++i) {
        const std::string rec = make_record(7, static_cast<uint64_t>(i), 300);
        auto pos = (*log)->append(rec);
        ASSERT_TRUE(pos.has_value()) << pos.error().describe();
        recorder.ack(*pos, rec);  // appended, never required: nothing synced it
      }
      ASSERT_TRUE((*log)->close().has_value());
    }
    first = recorder.take();
  }
  // The process dies just before close() syncs anything of its appends.
  uint64_t k1 = first.next_seq;
  for (const auto& e : first.events) {
    // (buffered and direct segments write at the sync, then fdatasync)
    const bool data_sync = e.op == io::Op::msync || e.op == io::Op::datasync;
    if (data_sync && e.name.ends_with(".seg")) k1 = std::min(k1, e.begin);
  }
  const Simulator sim1(first);
  CrashImage crashed = sim1.image(k1, Model::old_or_new, 1, Crash::process);
  Workload w;
  w.mode = SyncMode::batch;
  w.threads = 2;
  w.appends = 30;
  Session second = record_session(cfg, crashed.state, w, 2, 1);
  ASSERT_TRUE(second.opened) << second.open_error;
  ASSERT_GT(second.replayed.size(), 0u) << "the second session found none of the first's appends";
  Verdict v;
  v.end = second.replayed.size();
  const Oracle oracle = next_oracle(nullptr, 0, &v, second);
  Oracle with_replayed;
  for (const auto& [pos, bytes] : second.replayed)
    with_replayed.order.push_back(Ack{UINT64_MAX, pos, bytes});
  for (const Ack& a : oracle.order) with_replayed.order.push_back(a);
  const Checker chk(with_replayed.order, {});
  const Simulator sim2(second.rec);
  // Power lost after the second session closed: every page the first
  // session left unsynced comes out old or new.
  int failures = 0;
  for (uint64_t seed = 0; seed < 20 && failures < 3; ++seed) {
    const CrashImage img = sim2.image(sim2.moments() - 1, Model::old_or_new, seed, Crash::power);
    TempDir dir;
    std::string err;
    ASSERT_TRUE(img.write_to(dir.path(), &err)) << err;
    Config c = cfg;
    c.dir = dir.path();
    const Verdict fv = chk.check(img, c);
    if (!fv.ok) {
      ++failures;
      ADD_FAILURE() << "power loss after the second session (seed " << seed << "): " << fv.problem;
    }
  }
}

TEST(ChainSim, CrashRestartChains) {
  const int histories = static_cast<int>(env_long("SYNCLOG_CHAIN_HISTORIES", kSanitized ? 3 : 12));
  const int sessions = static_cast<int>(env_long("SYNCLOG_CHAIN_SESSIONS", 3));
  const int states = static_cast<int>(env_long("SYNCLOG_CHAIN_STATES", kSanitized ? 10 : 40));
  const uint64_t base_seed = static_cast<uint64_t>(env_long(
      "SYNCLOG_CHAIN_SEED", 0xc4a1e5 + std::hash<std::string>{}(backend_under_test()) % 1000));
  Totals t;
  const auto storm = SignalStorm::from_env();
  const auto start = std::chrono::steady_clock::now();
  // SYNCLOG_CHAIN_HISTORY=<seed> runs that one history (a failure names it).
  const char* one = std::getenv("SYNCLOG_CHAIN_HISTORY");
  // Every run covers path 7 (another log's segment): while no history has
  // had one, up to 40 more run, ordinary histories of the same base seed.
  const int extra = sessions >= 3 ? 40 : 0;
  for (int h = 0;
       t.failures == 0 && (h < histories || (t.foreign_swaps == 0 && h < histories + extra)); ++h) {
    const uint64_t seed = one && *one ? std::strtoull(one, nullptr, 0)
                                      : mix_seed(base_seed, static_cast<uint64_t>(h));
    run_history(chain_config(), seed, sessions, states, &t);
    if (one && *one) break;
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[chain-sim] backend " << backend_under_test() << ", base seed " << base_seed << ": "
            << t.histories << " histories of " << sessions << " sessions, " << t.states
            << " crash states (" << t.power_losses << " power losses, " << t.process_crashes
            << " process crashes), " << t.acked << " acknowledged records recorded, " << t.checked
            << " required records checked, " << t.foreign_swaps << " foreign segments swapped in, "
            << t.failed_sessions << " sessions failed at a sync (" << t.error_completions
            << " completions failed), " << t.large_appended
            << " large (fragmented) records appended, " << t.large_acked << " acknowledged, "
            << t.large_checked << " required large records checked, " << t.compressed
            << " histories compressed (lz4 or zstd), " << t.encrypted << " encrypted (aes-256-gcm)"
            << storm_summary(storm.get()) << "; " << t.failures << " failed, in " << secs << " s"
            << std::endl;
  EXPECT_EQ(t.failures, 0u);
  if (extra > 0 && !(one && *one)) {
    EXPECT_GT(t.foreign_swaps, 0u) << "no history allowed another log's segment: path 7 untested";
  }
}

}  // namespace
}  // namespace synclog::test
