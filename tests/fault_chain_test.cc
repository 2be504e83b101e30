// Faults in one session never cost a later session a record (G5-G7). A log
// is written and closed; then a session opens it with one I/O call failing
// (EIO, ENOSPC, EMFILE or ENOMEM): the n-th call of any kind the library
// makes in the directory, from open and recovery through appends, syncs,
// spare creation and release_before to close, for every n until a session
// runs through without reaching n. Whatever that session reports, a
// fault-free open afterwards must replay every record the first session
// wrote and every append the faulty session acknowledged, in order, with
// nothing that was never appended.
//
// A failed data sync is raced against appenders (path 2): when the fault
// hits one, late appenders arrive spread over the next few milliseconds while
// the failing thread unwinds slowly (slow_alloc.h); no append may be
// acknowledged past the durable position the failure found, and nothing may
// sync the failed bytes again.
//
// A third campaign starts from a log with proven damage (path 4): the
// default mode must refuse it whatever call fails, and the damage must still
// be there, with every record around it, for a fault-free open.
//
// SYNCLOG_FAULT_CALLS caps the calls tried (default: all of them);
// SYNCLOG_FAULT_STRIDE tries every k-th call (default 1; 3 under TSan, which
// looks for races, not for more calls: release and ASan try every one).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "io/hook.h"
#include "signal_storm.h"
#include "slow_alloc.h"
#include "test_util.h"

namespace synclog::test {
namespace {

// Fails the n-th operation (counting from 1) on the directory or a file in
// it with `err`; counts them all.
class FailNth : public io::Hook {
 public:
  FailNth(std::filesystem::path dir, uint64_t n, int err)
      : dir_(std::move(dir)), n_(n), err_(err) {}
  int before(const io::Event& e) override {
    if (e.path != dir_ && e.path.parent_path() != dir_) return 0;
    const uint64_t k = ++count_;
    const bool data_sync =
        e.path.extension() == ".seg" &&
        (e.op == io::Op::msync || e.op == io::Op::datasync || e.op == io::Op::direct_write);
    std::lock_guard lock(mu_);
    if (k != n_) {
      // The same file's fdatasync, or a write or msync over the same bytes.
      const bool same = data_sync && !failed_name_.empty() &&
                        e.path.filename().string() == failed_name_ &&
                        (e.op == io::Op::datasync || failed_op_ == io::Op::datasync ||
                         (e.offset < failed_end_ && e.offset + e.length > failed_offset_));
      if (same) ++retried_;
      return 0;
    }
    what_ = std::string(op_name(e.op)) + " " + e.path.filename().string();
    if (data_sync) {
      failed_name_ = e.path.filename().string();
      failed_op_ = e.op;
      failed_offset_ = e.offset;
      failed_end_ = e.offset + e.length;
      const Log* log = log_.load();
      durable_at_failure_ = log ? log->durable() : Position();
      // The failing thread unwinds slowly, and the late appenders set off:
      // a window between the failure and marking the log failed stays open
      // while they arrive.
      slow_allocations(40);
      sync_failed_.store(1);
      sync_failed_.notify_all();
    }
    return err_;
  }
  // The log whose durable position a failed data sync records.
  void watch(const Log* log) { log_.store(log); }
  // 0 until a data sync failed, then 1; 2 once the session's writers ended.
  std::atomic<int>& sync_failed() { return sync_failed_; }
  // Nothing at or past this may be acknowledged once a data sync failed.
  Position durable_at_failure() const {
    std::lock_guard lock(mu_);
    return durable_at_failure_;
  }
  // Opens and reads (recovery's, the readers') count and fail the same way.
  int access(const io::Event& e) override { return before(e); }
  // Syncs of the failed sync's bytes issued after it failed: each would be
  // the retry that "succeeds" on pages the kernel already marked clean.
  uint64_t retried() const { return retried_.load(); }
  uint64_t count() const { return count_.load(); }
  std::string what() const {
    std::lock_guard lock(mu_);
    return what_;
  }

 private:
  static const char* op_name(io::Op op) {
    switch (op) {
      case io::Op::write:
        return "write";
      case io::Op::direct_write:
        return "direct write";
      case io::Op::datasync:
        return "fdatasync";
      case io::Op::fsync:
        return "fsync";
      case io::Op::dir_sync:
        return "directory fsync";
      case io::Op::msync:
        return "msync";
      case io::Op::allocate:
        return "fallocate";
      case io::Op::rename:
        return "rename";
      case io::Op::remove:
        return "unlink";
      case io::Op::open:
        return "open";
      case io::Op::read:
        return "read";
    }
    return "operation";
  }
  const std::filesystem::path dir_;
  const uint64_t n_;
  const int err_;
  std::atomic<uint64_t> count_{0};
  std::string failed_name_;  // the failed data sync, if the fault hit one
  io::Op failed_op_{};
  uint64_t failed_offset_ = 0, failed_end_ = 0;
  std::atomic<uint64_t> retried_{0};
  std::atomic<const Log*> log_{nullptr};
  std::atomic<int> sync_failed_{0};
  Position durable_at_failure_;
  mutable std::mutex mu_;
  std::string what_;
};

constexpr uint32_t kFirst = 1;  // thread ids in make_record
constexpr int kFaultyThreads = 2;
constexpr int kFaultyAppends = 40;  // per thread
constexpr int kLateAppenders = 24;  // one append each, 100 us apart, after a failed sync

Config fault_config(const std::filesystem::path& dir) {
  Config cfg = small_config(dir);
  cfg.segment_size = 64 << 10;
  cfg.allocation_timeout = std::chrono::milliseconds(300);
  return cfg;
}

// The faulty session: open, replay, appends from two threads, a release,
// close. Returns the acknowledged (thread, seq) pairs.
struct Faulty {
  bool opened = false;
  std::string outcome;                 // the first error any call returned
  std::map<uint32_t, uint64_t> acked;  // thread -> appends acknowledged (seq 0..n-1 in order)
  std::map<Position, std::string> acked_at;
  Position released_before;    // the release_before it called, if any
  int late_appends_tried = 0;  // appends that raced a failed data sync
  bool replay_ok = true;
  std::string replay_problem;
};

Faulty faulty_session(const Config& cfg, const std::vector<Replayed>& first, FailNth& hook) {
  Faulty f;
  auto note = [&](const Error& e) {
    if (f.outcome.empty()) f.outcome = e.describe();
  };
  auto log = Log::open(cfg);
  if (!log) {
    note(log.error());
    return f;
  }
  f.opened = true;
  hook.watch(log->get());
  {
    // What this open replays must be the first session's records, exactly.
    auto reader = (*log)->read();
    size_t i = 0;
    if (!reader) {
      note(reader.error());
    } else {
      for (;; ++i) {
        auto rec = reader->next();
        if (!rec) {
          note(rec.error());
          break;
        }
        if (!*rec) break;
        const std::string data(reinterpret_cast<const char*>((*rec)->data.data()),
                               (*rec)->data.size());
        if (i >= first.size() || first[i].data != data) {
          f.replay_ok = false;
          f.replay_problem = "open under a fault replayed record " + std::to_string(i) + " wrongly";
          break;
        }
      }
      if (f.replay_ok && i != first.size() && f.outcome.empty()) {
        f.replay_ok = false;
        f.replay_problem = "open under a fault replayed " + std::to_string(i) + " of " +
                           std::to_string(first.size()) + " records without an error";
      }
    }
  }
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int t = 0; t < kFaultyThreads; ++t) {
    threads.emplace_back([&, t] {
      const uint32_t id = kFirst + 1 + static_cast<uint32_t>(t);
      for (int i = 0; i < kFaultyAppends; ++i) {
        const std::string rec = make_record(id, static_cast<uint64_t>(i), 100 + 37 * i);
        auto pos = (*log)->append(rec);
        std::lock_guard lock(mu);
        if (!pos) {
          note(pos.error());
          return;  // an append error ends this writer: later appends could not be ordered
        }
        f.acked[id] = static_cast<uint64_t>(i) + 1;
        f.acked_at[*pos] = rec;
      }
    });
  }
  for (int h = 0; h < kLateAppenders; ++h) {
    threads.emplace_back([&, h] {
      hook.sync_failed().wait(0);
      if (hook.sync_failed().load() != 1) return;
      std::this_thread::sleep_for(std::chrono::microseconds(100) * h);
      const uint32_t id = kFirst + 1 + kFaultyThreads + static_cast<uint32_t>(h);
      const std::string rec = make_record(id, 0, 64);
      auto pos = (*log)->append(rec);
      std::lock_guard lock(mu);
      ++f.late_appends_tried;
      if (!pos) {
        note(pos.error());
        return;
      }
      f.acked[id] = 1;
      f.acked_at[*pos] = rec;
    });
  }
  for (int t = 0; t < kFaultyThreads; ++t) threads[t].join();
  if (int none = 0; hook.sync_failed().compare_exchange_strong(none, 2))
    hook.sync_failed().notify_all();
  for (auto& th : threads) {
    if (th.joinable()) th.join();
  }
  const Position d = (*log)->durable();
  // One segment at a time: after a failed release, the next must not make
  // a hole.
  for (uint64_t back : {4, 3, 2, 1}) {
    if (d.segment() <= back + 1) continue;
    f.released_before = Position(d.segment() - back, 0);
    if (auto r = (*log)->release_before(f.released_before); !r) note(r.error());
  }
  if (auto r = (*log)->close(); !r) note(r.error());
  return f;
}

// One faulty session per n, on a fresh copy of `files`, with the n-th call
// failing (EIO, ENOSPC, EMFILE, ENOMEM in turn), until a session runs
// through without reaching n. `check` judges what the session left; it runs
// after the checks every campaign shares. Returns the sessions tried.
template <class Check>
uint64_t for_every_fault(const Files& files, const std::vector<Replayed>& first, Check check) {
  const int errs[] = {EIO, ENOSPC, EMFILE, ENOMEM};
  const char* env = std::getenv("SYNCLOG_FAULT_CALLS");
  const uint64_t cap = env && *env ? std::strtoull(env, nullptr, 0) : UINT64_MAX;
  const char* stride_env = std::getenv("SYNCLOG_FAULT_STRIDE");
  const uint64_t stride =
      std::max<uint64_t>(1, stride_env && *stride_env ? std::strtoull(stride_env, nullptr, 0)
                            : kThreadSanitized        ? 3
                                                      : 1);
  uint64_t tried = 0;
  for (uint64_t n = 1; n <= cap && !testing::Test::HasFatalFailure(); n += stride) {
    TempDir dir;
    write_segments(dir.path(), files);
    const Config cfg = fault_config(dir.path());
    const int err = errs[n % 4];
    FailNth hook(dir.path(), n, err);
    Faulty f;
    {
      HookGuard guard(&hook);
      f = faulty_session(cfg, first, hook);
    }
    SCOPED_TRACE("fault " + std::string(std::strerror(err)) + " at call " + std::to_string(n) +
                 " (" + hook.what() +
                 "); the session reported: " + (f.outcome.empty() ? "nothing" : f.outcome));
    if (hook.count() < n) break;  // the session ran through without reaching call n
    ++tried;
    if (std::getenv("SYNCLOG_FAULT_VERBOSE"))
      std::cout << "call " << n << ": " << hook.what() << " -> "
                << (f.outcome.empty() ? "nothing" : f.outcome) << std::endl;
    EXPECT_TRUE(f.replay_ok) << f.replay_problem;
    EXPECT_EQ(hook.retried(), 0u) << "segment data was synced again after a failed sync (G4)";
    if (hook.sync_failed().load() == 1) {
      const Position limit = hook.durable_at_failure();
      for (const auto& [pos, data] : f.acked_at) {
        EXPECT_LT(pos, limit) << "append at " << pos.to_string()
                              << " acknowledged after a data sync failed at durable position "
                              << limit.to_string() << " (G4)";
      }
    }
    check(cfg, f);
  }
  return tried;
}

// The first session's log: closed cleanly, or as a crashed process left it
// (copied while open, after its last sync: no end record, a spare after it,
// so recovery's look-ahead over later segments runs under the fault too).
struct FirstSession {
  Files files;
  std::vector<Replayed> records;  // what an open must replay
};

FirstSession write_first_session(bool crashed) {
  FirstSession out;
  TempDir tmpl;
  auto log = Log::open(fault_config(tmpl.path()));
  EXPECT_TRUE(log.has_value()) << log.error().describe();
  if (!log) return out;
  for (uint64_t i = 0; i < 150; ++i) {
    const std::string rec = make_record(kFirst, i, 200 + 11 * i);
    auto pos = (*log)->append(rec);
    EXPECT_TRUE(pos.has_value()) << pos.error().describe();
    if (!pos) return out;
    out.records.push_back(Replayed{*pos, rec});
  }
  EXPECT_TRUE((*log)->release_before(Position(2, 0)).has_value());
  if (crashed) out.files = load_segments(tmpl.path());
  EXPECT_TRUE((*log)->close().has_value());
  std::erase_if(out.records, [](const Replayed& r) { return r.position.segment() < 2; });
  if (!crashed) out.files = load_segments(tmpl.path());
  return out;
}

void run_campaign(bool crashed) {
  const auto storm = SignalStorm::from_env();
  const FirstSession first = write_first_session(crashed);
  ASSERT_FALSE(testing::Test::HasFailure());
  uint64_t open_failed = 0, session_errors = 0, checked_records = 0, failed_syncs_raced = 0;
  std::map<std::string, int> outcomes;
  const uint64_t tried =
      for_every_fault(first.files, first.records, [&](const Config& cfg, const Faulty& f) {
        open_failed += !f.opened;
        session_errors += !f.outcome.empty();
        if (!f.outcome.empty()) ++outcomes[f.outcome.substr(0, f.outcome.find(':'))];
        failed_syncs_raced += f.late_appends_tried;

        // A fault-free open afterwards loses nothing.
        auto got = replay_all(cfg);
        ASSERT_TRUE(got.has_value())
            << "fault-free open after the faulty session failed: " << got.error().describe();
        // Records in segments before the faulty session's release floor may be
        // gone; every other record of the first session and every append the
        // faulty session acknowledged must be there, byte for byte, in order.
        // Besides them only an append that returned an error may replay.
        const uint64_t floor = f.released_before.segment();
        std::map<Position, std::string> required;
        for (const auto& r : first.records) {
          if (r.position.segment() >= floor) required[r.position] = r.data;
        }
        for (const auto& [pos, data] : f.acked_at) {
          if (pos.segment() >= floor) required[pos] = data;
        }
        Position last;
        for (size_t i = 0; i < got->size(); ++i) {
          const auto& r = (*got)[i];
          ASSERT_TRUE(i == 0 || last < r.position) << "replay out of order at record " << i;
          last = r.position;
          uint32_t thread = 0;
          uint64_t seq = 0;
          ASSERT_TRUE(check_record(r.data, &thread, &seq))
              << "replayed record " << i << " at " << r.position.to_string()
              << " was never appended";
          if (auto it = required.find(r.position); it != required.end()) {
            ASSERT_TRUE(it->second == r.data)
                << "record at " << r.position.to_string() << " differs";
            required.erase(it);
            continue;
          }
          if (thread == kFirst) {
            ASSERT_LT(r.position.segment(), floor)
                << "a first-session record at an unexpected place";
            continue;
          }
          auto acked = f.acked.find(thread);
          const uint64_t n_acked = acked == f.acked.end() ? 0 : acked->second;
          ASSERT_TRUE(seq <= n_acked && (seq < n_acked ? r.position.segment() < floor : true))
              << "replayed append " << seq << " of thread " << thread << " at "
              << r.position.to_string() << " was never appended there";
        }
        ASSERT_TRUE(required.empty())
            << required.size() << " required records were lost, the first at "
            << required.begin()->first.to_string() << " (release floor "
            << f.released_before.to_string() << ", " << got->size() << " replayed)";
        checked_records += got->size();
      });
  std::cout << "[fault-chain] backend " << backend_under_test()
            << (crashed ? ", after a process crash: " : ", after a clean close: ") << tried
            << " sessions, one fault each (EIO, ENOSPC, EMFILE, ENOMEM at each I/O call, opens and "
               "reads included, in turn); "
            << open_failed << " failed to open, " << session_errors << " reported an error; "
            << failed_syncs_raced << " late appends raced a failed data sync; " << checked_records
            << " records replayed by the fault-free opens after them, all checked"
            << storm_summary(storm.get());
  for (const auto& [what, count] : outcomes) std::cout << "; " << what << " x" << count;
  std::cout << std::endl;
  EXPECT_GT(tried, 20u);
}

TEST(FaultChain, OneFaultAtEveryCallAfterACleanClose) { run_campaign(false); }

TEST(FaultChain, OneFaultAtEveryCallAfterAProcessCrash) { run_campaign(true); }

// Path 4: a log whose damage only a later segment's sync marker proves, so
// recovery tells it from a torn tail only by reading ahead. Whatever call
// fails, the default mode must refuse to open, never take the damage for a
// torn tail (and then drop the later segment as never acknowledged); a
// fault-free open afterwards still finds the damage and every record
// around it.
TEST(FaultChain, OneFaultAtEveryCallOfRecoveryOverProvenDamage) {
  FirstSession first = write_first_session(false);
  ASSERT_FALSE(HasFailure());
  // The second half of the segment before the last one holding records,
  // its last markers included (a spare may follow the last).
  const uint64_t last = first.records.back().position.segment();
  auto after = first.files.find(last);
  ASSERT_TRUE(after != first.files.end() && after != first.files.begin())
      << "the damage needs a segment before the last";
  std::string& victim = std::prev(after)->second;
  std::fill(victim.begin() + static_cast<std::ptrdiff_t>(victim.size() / 2), victim.end(), '\0');

  TempDir control_dir;
  write_segments(control_dir.path(), first.files);
  Config control_cfg = fault_config(control_dir.path());
  {
    auto refused = Log::open(control_cfg);
    ASSERT_FALSE(refused.has_value()) << "the default mode opened a provably damaged log";
    ASSERT_EQ(refused.error().code, Errc::corruption) << refused.error().describe();
  }
  control_cfg.recovery = RecoveryMode::skip_damaged;
  auto control = replay_all(control_cfg);
  ASSERT_TRUE(control.has_value()) << control.error().describe();
  ASSERT_LT(control->size(), first.records.size());
  ASSERT_TRUE(std::any_of(control->begin(), control->end(), [&](const Replayed& r) {
    return r.position.segment() == last;
  })) << "no record after the damage to lose";

  uint64_t refused = 0;
  const uint64_t tried =
      for_every_fault(first.files, *control, [&](const Config& cfg, const Faulty& f) {
        refused += !f.opened;
        EXPECT_FALSE(f.opened) << "the default mode opened a provably damaged log under a fault";
        {
          auto again = Log::open(cfg);
          ASSERT_FALSE(again.has_value())
              << "after the faulty session the default mode opens the log: its damage is gone";
          ASSERT_EQ(again.error().code, Errc::corruption) << again.error().describe();
        }
        Config skip = cfg;
        skip.recovery = RecoveryMode::skip_damaged;
        auto got = replay_all(skip);
        ASSERT_TRUE(got.has_value()) << got.error().describe();
        ASSERT_EQ(got->size(), control->size())
            << "skip-damaged replays another set of records after the faulty session";
        for (size_t i = 0; i < got->size(); ++i) {
          ASSERT_TRUE((*got)[i].position == (*control)[i].position &&
                      (*got)[i].data == (*control)[i].data)
              << "record " << i << " at " << (*got)[i].position.to_string() << " differs";
        }
      });
  std::cout << "[fault-chain] backend " << backend_under_test() << ", damage proven by segment "
            << last << ": " << tried << " opens, one fault each, " << refused << " refused; "
            << control->size() << " records around the damage checked after each" << std::endl;
  EXPECT_GT(tried, 3u);
}

}  // namespace
}  // namespace synclog::test
