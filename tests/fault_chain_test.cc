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
// SYNCLOG_FAULT_CALLS caps the calls tried (default: all of them).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "io/hook.h"
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
    }
    return err_;
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
  mutable std::mutex mu_;
  std::string what_;
};

constexpr uint32_t kFirst = 1;  // thread ids in make_record
constexpr int kFaultyThreads = 2;
constexpr int kFaultyAppends = 40;  // per thread

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
  Position released_before;  // the release_before it called, if any
  bool replay_ok = true;
  std::string replay_problem;
};

Faulty faulty_session(const Config& cfg, const std::vector<Replayed>& first) {
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
  for (auto& th : threads) th.join();
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

// The first session's log: closed cleanly, or as a crashed process left it
// (copied while open, after its last sync: no end record, a spare after it,
// so recovery's look-ahead over later segments runs under the fault too).
void run_campaign(bool crashed) {
  TempDir tmpl;
  std::vector<Replayed> first;
  Files files;
  {
    auto log = Log::open(fault_config(tmpl.path()));
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    for (uint64_t i = 0; i < 150; ++i) {
      const std::string rec = make_record(kFirst, i, 200 + 11 * i);
      auto pos = (*log)->append(rec);
      ASSERT_TRUE(pos.has_value()) << pos.error().describe();
      first.push_back(Replayed{*pos, rec});
    }
    ASSERT_TRUE((*log)->release_before(Position(2, 0)).has_value());
    if (crashed) files = load_segments(tmpl.path());
    ASSERT_TRUE((*log)->close().has_value());
  }
  std::erase_if(first, [](const Replayed& r) { return r.position.segment() < 2; });
  if (!crashed) files = load_segments(tmpl.path());

  const int errs[] = {EIO, ENOSPC, EMFILE, ENOMEM};
  const char* env = std::getenv("SYNCLOG_FAULT_CALLS");
  const uint64_t cap = env && *env ? std::strtoull(env, nullptr, 0) : UINT64_MAX;
  uint64_t tried = 0, open_failed = 0, session_errors = 0, checked_records = 0;
  std::map<std::string, int> outcomes;
  for (uint64_t n = 1; n <= cap; ++n) {
    TempDir dir;
    write_segments(dir.path(), files);
    const Config cfg = fault_config(dir.path());
    const int err = errs[n % 4];
    FailNth hook(dir.path(), n, err);
    Faulty f;
    {
      HookGuard guard(&hook);
      f = faulty_session(cfg, first);
    }
    SCOPED_TRACE("fault " + std::string(std::strerror(err)) + " at call " + std::to_string(n) +
                 " (" + hook.what() +
                 "); the session reported: " + (f.outcome.empty() ? "nothing" : f.outcome));
    if (hook.count() < n) break;  // the session ran through without reaching call n
    ++tried;
    open_failed += !f.opened;
    session_errors += !f.outcome.empty();
    if (!f.outcome.empty()) ++outcomes[f.outcome.substr(0, f.outcome.find(':'))];
    if (std::getenv("SYNCLOG_FAULT_VERBOSE"))
      std::cout << "call " << n << ": " << hook.what() << " -> "
                << (f.outcome.empty() ? "nothing" : f.outcome) << std::endl;
    EXPECT_TRUE(f.replay_ok) << f.replay_problem;
    EXPECT_EQ(hook.retried(), 0u) << "segment data was synced again after a failed sync (G4)";

    // A fault-free open afterwards loses nothing.
    auto got = replay_all(cfg);
    ASSERT_TRUE(got.has_value()) << "fault-free open after the faulty session failed: "
                                 << got.error().describe();
    // Records in segments before the faulty session's release floor may be
    // gone; every other record of the first session and every append the
    // faulty session acknowledged must be there, byte for byte, in order.
    // Besides them only an append that returned an error may replay.
    const uint64_t floor = f.released_before.segment();
    std::map<Position, std::string> required;
    for (const auto& r : first) {
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
          << "replayed record " << i << " at " << r.position.to_string() << " was never appended";
      if (auto it = required.find(r.position); it != required.end()) {
        ASSERT_TRUE(it->second == r.data) << "record at " << r.position.to_string() << " differs";
        required.erase(it);
        continue;
      }
      if (thread == kFirst) {
        ASSERT_LT(r.position.segment(), floor) << "a first-session record at an unexpected place";
        continue;
      }
      auto acked = f.acked.find(thread);
      const uint64_t n_acked = acked == f.acked.end() ? 0 : acked->second;
      ASSERT_TRUE(seq <= n_acked && (seq < n_acked ? r.position.segment() < floor : true))
          << "replayed append " << seq << " of thread " << thread << " at "
          << r.position.to_string() << " was never appended there";
    }
    ASSERT_TRUE(required.empty()) << required.size() << " required records were lost, the first at "
                                  << required.begin()->first.to_string() << " (release floor "
                                  << f.released_before.to_string() << ", " << got->size()
                                  << " replayed)";
    checked_records += got->size();
  }
  std::cout << "[fault-chain] backend " << backend_under_test()
            << (crashed ? ", after a process crash: " : ", after a clean close: ") << tried
            << " sessions, one fault each (EIO, ENOSPC, EMFILE, ENOMEM at each I/O call, opens and "
               "reads included, in turn); "
            << open_failed << " failed to open, " << session_errors << " reported an error; "
            << checked_records
            << " records replayed by the fault-free opens after them, all checked";
  for (const auto& [what, count] : outcomes) std::cout << "; " << what << " x" << count;
  std::cout << std::endl;
  EXPECT_GT(tried, 20u);
}

TEST(FaultChain, OneFaultAtEveryCallAfterACleanClose) { run_campaign(false); }

TEST(FaultChain, OneFaultAtEveryCallAfterAProcessCrash) { run_campaign(true); }

}  // namespace
}  // namespace synclog::test
