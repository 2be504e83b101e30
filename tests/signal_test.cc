// Signals without SA_RESTART, sent to every thread of the process from
// before Log::open to after close (tests/signal_storm.h): every backend in
// every mode still
//  - opens and makes its first sync (a wait cut short must never leave a
//    probe's request in the kernel for the first real sync to take as its
//    own, or free what that request names);
//  - acknowledges an append only once its bytes are in the segment file:
//    after each acknowledgement, a pread of the file at the returned
//    position must find the record (for direct and buffered segments the
//    file is what the kernel wrote; an acknowledgement that came before the
//    write finds the pre-zeroed bytes);
//  - replays every acknowledged record after close.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "segments/format.h"
#include "segments/segment.h"
#include "signal_storm.h"
#include "test_util.h"

namespace synclog::test {
namespace {

constexpr auto kStormPeriod = std::chrono::microseconds(150);

// Reads what the segment file holds where `pos` says a record of `want`
// bytes was written.
class FileProbe {
 public:
  explicit FileProbe(std::filesystem::path dir) : dir_(std::move(dir)) {}
  ~FileProbe() {
    for (auto& [id, fd] : fds_) ::close(fd);
  }
  // "" if the record's bytes are in the file, else what differs.
  std::string check(Position pos, const std::string& want) {
    int& fd = fds_[pos.segment()];
    if (fd == 0) fd = ::open((dir_ / seg::segment_file_name(pos.segment())).c_str(), O_RDONLY);
    if (fd < 0) return "cannot open segment " + std::to_string(pos.segment());
    std::string got(want.size(), '\0');
    size_t done = 0;
    while (done < got.size()) {
      const ssize_t n = ::pread(fd, got.data() + done, got.size() - done,
                                static_cast<off_t>(pos.offset() + seg::kRecordHeaderSize + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return "short read at " + pos.to_string();
      done += static_cast<size_t>(n);
    }
    if (got == want) return "";
    const bool zero = got.find_first_not_of('\0') == std::string::npos;
    return "record at " + pos.to_string() + " acknowledged but the file holds " +
           (zero ? "zeros" : "other bytes") + " there";
  }

 private:
  std::filesystem::path dir_;
  std::map<uint64_t, int> fds_;
};

struct Outcome {
  std::mutex mu;
  std::vector<std::pair<Position, std::string>> acked;
  std::vector<std::string> problems;
};

// Two appenders, 200-byte records; in periodic mode each calls sync() every
// 20 appends and checks what it appended since.
void run(SyncMode mode, const std::filesystem::path& base, int per_thread,
         const std::function<void(Config&)>& tweak = {}) {
  TempDir dir(base.string());
  Config cfg = small_config(dir.path());
  if (tweak) tweak(cfg);
  if (cfg.syncs_in_flight > 1 && cfg.segment_kind != SegmentKind::direct) {
    GTEST_SKIP() << "syncs_in_flight > 1 needs direct segments";
  }
  cfg.mode = mode;
  cfg.interval = std::chrono::milliseconds(1);
  cfg.window = std::chrono::microseconds(200);
  Outcome out;
  const uint64_t delivered_before = SignalStorm::delivered();
  {
    SignalStorm storm(kStormPeriod);
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    std::vector<std::thread> threads;
    for (uint32_t t = 0; t < 2; ++t) {
      threads.emplace_back([&, t] {
        FileProbe probe(dir.path());
        std::vector<std::pair<Position, std::string>> unsynced;
        auto fail = [&](std::string what) {
          std::lock_guard lock(out.mu);
          out.problems.push_back(std::move(what));
        };
        for (int i = 0; i < per_thread; ++i) {
          std::string rec = make_record(t, static_cast<uint64_t>(i), 200);
          auto pos = (*log)->append(rec);
          if (!pos) return fail("append: " + pos.error().describe());
          unsynced.emplace_back(*pos, rec);
          if (mode == SyncMode::periodic && unsynced.size() < 20 && i + 1 < per_thread) continue;
          if (mode == SyncMode::periodic) {
            if (auto s = (*log)->sync(); !s) return fail("sync: " + s.error().describe());
          }
          for (auto& [p, bytes] : unsynced) {
            if (auto bad = probe.check(p, bytes); !bad.empty()) fail(bad);
          }
          std::lock_guard lock(out.mu);
          for (auto& u : unsynced) out.acked.push_back(std::move(u));
          unsynced.clear();
        }
      });
    }
    for (auto& th : threads) th.join();
    auto closed = (*log)->close();
    EXPECT_TRUE(closed.has_value()) << closed.error().describe();
    EXPECT_GT(storm.sent(), 0u);
  }
  EXPECT_GT(SignalStorm::delivered(), delivered_before) << "no signal reached a thread";
  ASSERT_TRUE(out.problems.empty())
      << out.problems.size() << " problems, the first: " << out.problems.front();
  std::sort(out.acked.begin(), out.acked.end());
  auto replayed = replay_all(cfg);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  std::vector<Replayed> want;
  for (auto& [p, bytes] : out.acked) want.push_back(Replayed{p, bytes});
  EXPECT_TRUE(same_records(*replayed, want));
}

TEST(Signals, BatchAcknowledgesOnlyWhatIsInTheFile) {
  run(SyncMode::batch, "/dev/shm", scaled(3000));
}
TEST(Signals, GroupAcknowledgesOnlyWhatIsInTheFile) {
  run(SyncMode::group, "/dev/shm", scaled(500));
}
TEST(Signals, FourSyncsInFlight) {
  run(SyncMode::batch, "/dev/shm", scaled(3000), [](Config& c) { c.syncs_in_flight = 4; });
}
// Direct backends: plain writes, then an fdatasync of their own.
TEST(Signals, DirectWritesThenFdatasync) {
  run(SyncMode::batch, "/dev/shm", scaled(3000),
      [](Config& c) { c.direct_sync = DirectSync::fdatasync; });
}
TEST(Signals, PeriodicSyncCoversOnlyWhatIsInTheFile) {
  run(SyncMode::periodic, "/dev/shm", scaled(3000));
}
TEST(Signals, BatchOnDiskAcknowledgesOnlyWhatIsInTheFile) {
  run(SyncMode::batch, disk_base(), scaled(500));
}

// The open's probe and the first sync, many times: signals during open
// alone used to leave the probe's write in the kernel. Each round opens
// from a new thread: its first io_uring request then needs a new kernel
// worker, and a signal pending while the kernel makes it cancels the
// request (ECANCELED, never executed), which the probe took for a failure.
void open_then_first_sync(const std::function<void(Config&)>& tweak) {
  {
    TempDir probe;
    Config cfg = small_config(probe.path());
    tweak(cfg);
    if (cfg.direct_sync == DirectSync::fdatasync && cfg.segment_kind != SegmentKind::direct) {
      GTEST_SKIP() << "direct_sync applies to direct segments only";
    }
  }
  // The direct backends submit requests to the kernel at open (the probe):
  // they get the long run.
  const bool direct = small_config("/").segment_kind == SegmentKind::direct;
  const int rounds = scaled(direct ? 1000 : 150);
  SignalStorm storm(std::chrono::microseconds(10));
  for (int round = 0; round < rounds && !testing::Test::HasFatalFailure(); ++round) {
    std::thread([&] {
      TempDir dir;
      Config cfg = small_config(dir.path());
      tweak(cfg);
      for (int k = 0; k < 2; ++k) {  // a new log, then the same log reopened
        auto log = Log::open(cfg);
        ASSERT_TRUE(log.has_value()) << "round " << round << ": " << log.error().describe();
        std::string rec = make_record(0, static_cast<uint64_t>(round), 100);
        auto pos = (*log)->append(rec);
        ASSERT_TRUE(pos.has_value())
            << "round " << round << ", open " << k << ": " << pos.error().describe();
        FileProbe probe(dir.path());
        EXPECT_EQ(probe.check(*pos, rec), "") << "round " << round << ", open " << k;
        ASSERT_TRUE((*log)->close().has_value());
      }
    }).join();
  }
}

TEST(Signals, OpenThenFirstSync) {
  open_then_first_sync([](Config&) {});
}
// The same with the direct backends' own fdatasync requests, which the
// kernel always runs in a worker.
TEST(Signals, OpenThenFirstFdatasync) {
  open_then_first_sync([](Config& c) { c.direct_sync = DirectSync::fdatasync; });
}

// fallocate on tmpfs gives up with EINTR when a signal arrives and undoes
// what that call allocated: large segments must still be made, and appends
// must go on across segment switches.
TEST(Signals, LargeSegmentsOnTmpfs) {
  SignalStorm storm(std::chrono::microseconds(50));
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.segment_size = 64 << 20;
  cfg.spare_segments = 1;
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  const std::string rec(1 << 20, 'x');
  for (int i = 0; i < 130; ++i) {  // two segment switches
    auto pos = (*log)->append(rec);
    ASSERT_TRUE(pos.has_value()) << "append " << i << ": " << pos.error().describe();
  }
  ASSERT_TRUE((*log)->close().has_value());
}

}  // namespace
}  // namespace synclog::test
