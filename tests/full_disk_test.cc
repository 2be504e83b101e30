// G5: a full disk is back-pressure and a clear error, never corruption or a
// crash, and appends resume once space is released. The disk is a real
// small tmpfs that the test mounts (root only: the tests skip, saying why,
// where mount is refused). Segment files get their blocks before they are
// mapped, so an mmap store can never SIGBUS on a full disk: a SIGBUS here
// ends the test binary with a message saying so.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "segments/segment.h"
#include "test_util.h"

namespace synclog::test {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kRecordSize = 2000;

// Moves this process into a mount namespace of its own (once), so that a
// tmpfs it mounts goes away with it even when a test crashes mid-way.
void private_mounts() {
  static const bool done = [] {
    return ::unshare(CLONE_NEWNS) == 0 &&
           ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
  }();
  (void)done;  // without it, mounts are still unmounted on the normal path
}

// A tmpfs of `size` mounted on a fresh directory, unmounted at the end.
class SmallDisk {
 public:
  explicit SmallDisk(const std::string& size) : path_(base_.path() / "disk") {
    std::filesystem::create_directory(path_);
    private_mounts();
    const std::string opts = "size=" + size + ",mode=0755";
    if (::mount("synclog-full", path_.c_str(), "tmpfs", 0, opts.c_str()) == 0) {
      mounted_ = true;
    } else {
      why_ = std::strerror(errno);
    }
  }
  ~SmallDisk() {
    if (mounted_ && ::umount(path_.c_str()) != 0) ::umount2(path_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& why() const { return why_; }
  const std::filesystem::path& path() const { return path_; }
  // Grows (or shrinks) the filesystem in place: what an operator freeing
  // space looks like to the log.
  bool resize(const std::string& size) {
    const std::string opts = "size=" + size;
    return ::mount("synclog-full", path_.c_str(), "tmpfs", MS_REMOUNT, opts.c_str()) == 0;
  }
  uint64_t free_bytes() const {
    struct statvfs st;
    if (::statvfs(path_.c_str(), &st) != 0) return 0;
    return uint64_t{st.f_bavail} * st.f_frsize;
  }

 private:
  TempDir base_;  // on /dev/shm
  std::filesystem::path path_;
  bool mounted_ = false;
  std::string why_;
};

#define MOUNT_OR_SKIP(disk)                                                               \
  if (!(disk).mounted()) {                                                                \
    GTEST_SKIP() << "cannot mount a small tmpfs to fill up (needs root, CAP_SYS_ADMIN): " \
                 << (disk).why();                                                         \
  }

// Turns a SIGBUS (an mmap store into a page the full disk could not back)
// into a message naming the guarantee, then dies of it as before.
void on_sigbus(int) {
  static const char msg[] =
      "\nfull_disk_test: SIGBUS: a store into a mapped segment found no block on the full "
      "disk (G5: segments must get real blocks before they are mapped)\n";
  (void)!::write(2, msg, sizeof msg - 1);
}

class FullDisk : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    struct sigaction sa {};
    sa.sa_handler = on_sigbus;
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    ::sigaction(SIGBUS, &sa, nullptr);
  }
  void TearDown() override { ::signal(SIGBUS, SIG_DFL); }

  Config config(const std::filesystem::path& dir) const {
    Config cfg = small_config(dir);  // 256 KiB segments, batch mode
    cfg.recycle = false;
    cfg.max_total_size = 0;  // only the disk limits the log
    cfg.allocation_timeout = 200ms;
    cfg.prezero = GetParam();
    return cfg;
  }
};

struct Acked {
  Position position;
  std::string data;
};

// Appends 2000-byte records until one fails; returns that error.
Error fill(Log& log, uint32_t thread, std::vector<Acked>* acked) {
  for (uint64_t i = 0;; ++i) {
    std::string rec = make_record(thread, i, kRecordSize);
    auto pos = log.append(rec);
    if (!pos) return pos.error();
    acked->push_back({*pos, std::move(rec)});
    if (i > 100'000) return Error{Errc::invalid_argument, "the disk never filled up"};
  }
}

void expect_no_space(const Error& e) {
  EXPECT_EQ(e.code, Errc::no_space) << e.describe();
  EXPECT_NE(e.message.find(std::strerror(ENOSPC)), std::string::npos)
      << "the message should name the cause: " << e.describe();
}

// `replayed` must be exactly the records of `acked` from segment `from_segment` on.
void expect_replay(const std::vector<Replayed>& replayed, const std::vector<Acked>& acked,
                   uint64_t from_segment, const char* when) {
  std::vector<const Acked*> want;
  for (const auto& a : acked) {
    if (a.position.segment() >= from_segment) want.push_back(&a);
  }
  ASSERT_EQ(replayed.size(), want.size()) << when;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(replayed[i].position, want[i]->position) << when << ": record " << i;
    ASSERT_EQ(replayed[i].data, want[i]->data)
        << when << ": record " << i << " at " << want[i]->position.to_string();
  }
}

TEST_P(FullDisk, EnospcIsAClearErrorAndAppendsResumeAfterRelease) {
  SmallDisk disk("3m");
  MOUNT_OR_SKIP(disk);
  const Config cfg = config(disk.path());
  auto opened = Log::open(cfg);
  ASSERT_TRUE(opened.has_value()) << opened.error().describe();
  Log& log = **opened;

  std::vector<Acked> acked;
  const auto start = std::chrono::steady_clock::now();
  const Error error = fill(log, 1, &acked);
  const auto waited = std::chrono::steady_clock::now() - start;
  expect_no_space(error);
  std::printf("full disk after %zu records (%llu bytes free): %s\n", acked.size(),
              static_cast<unsigned long long>(disk.free_bytes()), error.describe().c_str());
  ASSERT_GT(acked.size(), 500u) << "3 MiB should hold ~10 segments of records";
  EXPECT_LT(disk.free_bytes(), cfg.segment_size) << "the disk is not really full";
  EXPECT_GE(log.stats().allocation_stalls, 1u);
  EXPECT_LT(waited, 30s);
  // Still full: the next append is refused the same way, and nothing breaks.
  auto again = log.append(make_record(1, 999'999, kRecordSize));
  ASSERT_FALSE(again.has_value());
  expect_no_space(again.error());

  // Everything acknowledged reads back intact from the live log.
  expect_replay(read_all(log), acked, 0, "live log on a full disk");

  // Releasing space lets appends go on.
  const Position cut = acked.back().position;
  ASSERT_TRUE(log.release_before(cut).has_value());
  EXPECT_GT(disk.free_bytes(), 4 * cfg.segment_size);
  for (uint64_t i = 0; i < 600; ++i) {
    std::string rec = make_record(2, i, kRecordSize);
    auto pos = log.append(rec);
    ASSERT_TRUE(pos.has_value()) << "append " << i << " after release: " << pos.error().describe();
    acked.push_back({*pos, std::move(rec)});
  }
  expect_replay(read_all(log), acked, cut.segment(), "live log after release");
  ASSERT_TRUE(log.close().has_value());
  opened->reset();

  RecoveryReport report;
  auto replayed = replay_all(cfg, &report);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  expect_replay(*replayed, acked, cut.segment(), "after close and reopen");
  EXPECT_TRUE(report.damage.empty()) << report.damage.front().reason;
}

// Writers that queue behind the one waiting for a segment are told the
// cause too (G5), not only that another append is waiting.
TEST_P(FullDisk, EveryWriterOnAFullDiskIsToldTheCause) {
  SmallDisk disk("3m");
  MOUNT_OR_SKIP(disk);
  const Config cfg = config(disk.path());
  auto opened = Log::open(cfg);
  ASSERT_TRUE(opened.has_value()) << opened.error().describe();
  std::mutex mu;
  std::vector<Error> errors;
  std::vector<std::thread> threads;
  for (uint32_t t = 1; t <= 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<Acked> acked;
      const Error e = fill(**opened, t, &acked);
      std::lock_guard lock(mu);
      errors.push_back(e);
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(errors.size(), 4u);
  for (const Error& e : errors) expect_no_space(e);
  ASSERT_TRUE((*opened)->close().has_value());
}

// A log closed on a full disk cannot open (it needs a new segment): the
// error must say why, touch nothing, and opening must work once the disk
// has room.
TEST_P(FullDisk, ReopenOnAFullDiskIsAClearErrorAndLosesNothing) {
  SmallDisk disk("3m");
  MOUNT_OR_SKIP(disk);
  const Config cfg = config(disk.path());
  std::vector<Acked> acked;
  {
    auto opened = Log::open(cfg);
    ASSERT_TRUE(opened.has_value()) << opened.error().describe();
    expect_no_space(fill(**opened, 1, &acked));
    auto closed = (*opened)->close();
    ASSERT_TRUE(closed.has_value()) << "close on a full disk: " << closed.error().describe();
  }
  auto files_before = std::vector<std::string>();
  for (const auto& e : std::filesystem::directory_iterator(disk.path())) {
    files_before.push_back(e.path().filename().string());
  }
  std::sort(files_before.begin(), files_before.end());

  auto reopened = Log::open(cfg);
  if (reopened) {
    // Enough room was left for one more segment: fine, as long as it replays.
    expect_replay(read_all(**reopened), acked, 0, "reopened on a nearly full disk");
    ASSERT_TRUE((*reopened)->close().has_value());
  } else {
    expect_no_space(reopened.error());
    std::printf("open on a full disk: %s\n", reopened.error().describe().c_str());
    std::vector<std::string> files_after;
    for (const auto& e : std::filesystem::directory_iterator(disk.path())) {
      files_after.push_back(e.path().filename().string());
    }
    std::sort(files_after.begin(), files_after.end());
    EXPECT_EQ(files_after, files_before) << "a failed open changed the directory";
    ASSERT_TRUE(disk.resize("6m")) << "remount: " << std::strerror(errno);
  }
  RecoveryReport report;
  auto replayed = replay_all(cfg, &report);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  expect_replay(*replayed, acked, 0, "after the disk grew");
  EXPECT_TRUE(report.damage.empty()) << report.damage.front().reason;
}

// Writers blocked on a full disk (a long allocation_timeout) wait, and go
// on as soon as another thread releases space: back-pressure, not failure.
TEST_P(FullDisk, BlockedWritersResumeWhenAnotherThreadReleasesSpace) {
  SmallDisk disk("3m");
  MOUNT_OR_SKIP(disk);
  Config cfg = config(disk.path());
  cfg.allocation_timeout = 60s;
  auto opened = Log::open(cfg);
  ASSERT_TRUE(opened.has_value()) << opened.error().describe();
  Log& log = **opened;

  constexpr int kWriters = 2;
  constexpr int kAfterRelease = 300;
  std::mutex mu;
  std::vector<Acked> acked;
  std::vector<Error> errors;
  std::atomic<uint64_t> progress{0};
  std::atomic<bool> released{false};
  std::atomic<int> after_release[kWriters] = {};
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  // Whatever way the test leaves, the writers stop and are joined (a
  // blocked one is freed by releasing everything that is durable).
  struct Joiner {
    std::atomic<bool>& stop;
    Log& log;
    std::vector<std::thread>& writers;
    ~Joiner() {
      stop = true;
      for (auto& w : writers) {
        if (w.joinable()) (void)log.release_before(log.durable());
        if (w.joinable()) w.join();
      }
    }
  } joiner{stop, log, writers};
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&, t] {
      for (uint64_t i = 0; !stop.load() && after_release[t].load() < kAfterRelease; ++i) {
        const bool was_released = released.load();
        std::string rec = make_record(10 + t, i, kRecordSize);
        auto pos = log.append(rec);
        std::lock_guard lock(mu);
        if (!pos) {
          errors.push_back(pos.error());
          return;
        }
        acked.push_back({*pos, std::move(rec)});
        progress.fetch_add(1);
        if (was_released) after_release[t].fetch_add(1);
      }
    });
  }
  // Blocked: no append returned for 500 ms, and the disk has no room for a segment.
  const auto give_up = std::chrono::steady_clock::now() + 30s;
  uint64_t seen = progress.load();
  auto still_since = std::chrono::steady_clock::now();
  bool blocked = false;
  while (std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(20ms);
    const uint64_t p = progress.load();
    if (p != seen) {
      seen = p;
      still_since = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - still_since > 500ms) {
      blocked = true;
      break;
    }
  }
  ASSERT_TRUE(blocked) << "the writers never blocked on the full disk";
  {
    std::lock_guard lock(mu);
    ASSERT_TRUE(errors.empty()) << "an append failed instead of waiting: " << errors[0].describe();
  }
  EXPECT_LT(disk.free_bytes(), cfg.segment_size) << "blocked, but the disk is not full";
  EXPECT_GE(log.stats().allocation_stalls, 1u);

  Position cut;
  {
    std::lock_guard lock(mu);
    cut = acked.back().position;
    for (const auto& a : acked) cut = std::max(cut, a.position);
  }
  const auto release_at = std::chrono::steady_clock::now();
  released = true;
  ASSERT_TRUE(log.release_before(cut).has_value());
  for (auto& w : writers) w.join();
  writers.clear();
  const auto resumed_in = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - release_at);
  std::printf(
      "%d writers blocked on a full disk, then did %d appends each in %lld ms after the "
      "release\n",
      kWriters, kAfterRelease, static_cast<long long>(resumed_in.count()));
  ASSERT_TRUE(errors.empty()) << "an append failed after the release: " << errors[0].describe();
  EXPECT_LT(resumed_in, 20s);

  std::sort(acked.begin(), acked.end(),
            [](const Acked& a, const Acked& b) { return a.position < b.position; });
  expect_replay(read_all(log), acked, cut.segment(), "live log after release");
  ASSERT_TRUE(log.close().has_value());
  opened->reset();
  auto replayed = replay_all(cfg);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  expect_replay(*replayed, acked, cut.segment(), "after close and reopen");
}

INSTANTIATE_TEST_SUITE_P(Prezero, FullDisk, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "prezero" : "no_prezero"; });

}  // namespace
}  // namespace synclog::test
