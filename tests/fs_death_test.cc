// When the filesystem dies under the log, every appender learns it at once
// and is told the true cause (G4, G5). ENOSPC, EDQUOT, EMFILE and ENFILE
// while a segment is made are back-pressure: Errc::no_space after
// allocation_timeout, and the log goes on once they clear. Any other error
// stops the log as a failed sync does: every waiting and later append,
// sync() and close() get Errc::failed naming the errno and the file. A
// segment creation that failed never leaves a name that makes the next
// attempt fail with EEXIST instead of the cause.
//
// Faults come from the I/O hook, and from real filesystems that die on a
// loop device: XFS shut down with `xfs_io -x -c shutdown`, and ext4 with
// errors=remount-ro made to report an error (/sys/fs/ext4/DEV/trigger_fs_error).
#include <fcntl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "io/hook.h"
#include "loop_fs.h"
#include "segments/segment.h"
#include "test_util.h"

namespace synclog::test {
namespace {

using namespace std::chrono_literals;

// Long enough that an append told no_space after it, where it should have
// been told Errc::failed at once, cannot be mistaken for a fast answer.
constexpr auto kLongWait = std::chrono::milliseconds(20'000);

// The segment id a segment file or spare temp file is named after; 0 for
// any other file.
uint64_t id_of(const std::filesystem::path& p) {
  const std::string name = p.filename().string();
  if (name.empty() || name[0] < '0' || name[0] > '9') return 0;
  if (!name.ends_with(".seg") && !name.ends_with(".seg.tmp")) return 0;
  return std::stoull(name);
}

// Fails one step of making the spares with ids from `from_id` on: creating
// the temp file, allocating it, renaming it to its segment name, and
// (separately) removing it. Once `fail_syncs` is set, also every sync of
// segment data.
class SpareFaults : public io::Hook {
 public:
  io::Op op = io::Op::allocate;
  int err = EIO;
  int remove_err = 0;  // errno for unlinking a spare's temp file; 0: works
  uint64_t from_id = 2;
  std::atomic<bool> fail_syncs{false};
  std::atomic<bool> off{false};

  int before(const io::Event& e) override {
    if (off.load()) return 0;
    const bool tmp = e.path.filename().string().ends_with(".seg.tmp");
    if (e.op == io::Op::remove && tmp && id_of(e.path) >= from_id && remove_err != 0) {
      return remove_err;
    }
    if (fail_syncs.load() && e.path.extension() == ".seg" &&
        (e.op == io::Op::msync || e.op == io::Op::datasync || e.op == io::Op::direct_write)) {
      return EIO;
    }
    if (e.op == op && op != io::Op::open && tmp && id_of(e.path) >= from_id) {
      ++fired_;
      return err;
    }
    return 0;
  }
  int access(const io::Event& e) override {
    if (off.load() || op != io::Op::open || e.op != io::Op::open) return 0;
    if ((e.open_flags & O_CREAT) == 0) return 0;
    if (!e.path.filename().string().ends_with(".seg.tmp") || id_of(e.path) < from_id) return 0;
    ++fired_;
    return err;
  }
  int fired() const { return fired_.load(); }

 private:
  std::atomic<int> fired_{0};
};

const char* op_name(io::Op op) {
  switch (op) {
    case io::Op::open:
      return "create";
    case io::Op::allocate:
      return "fallocate";
    case io::Op::rename:
      return "rename";
    default:
      return "other";
  }
}

struct Acked {
  Position position;
  std::string data;
};

// Appends from `threads` threads until each gets an error; returns them.
std::vector<Error> append_until_error(Log& log, int threads, std::vector<Acked>* acked) {
  std::mutex mu;
  std::vector<Error> errors;
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      for (uint64_t i = 0; i < 1'000'000; ++i) {
        std::string rec = make_record(static_cast<uint32_t>(t + 1), i, 1000);
        auto pos = log.append(rec);
        std::lock_guard lock(mu);
        if (!pos) {
          errors.push_back(pos.error());
          return;
        }
        acked->push_back({*pos, std::move(rec)});
      }
    });
  }
  for (auto& th : ts) th.join();
  return errors;
}

// Every acknowledged record of a batch-mode log is there after a reopen.
void expect_acked_replayed(const Config& cfg, const std::vector<Acked>& acked) {
  auto replayed = replay_all(cfg);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  std::map<Position, std::string> found;
  for (auto& r : *replayed) found[r.position] = r.data;
  for (const auto& a : acked) {
    auto it = found.find(a.position);
    ASSERT_TRUE(it != found.end())
        << "acknowledged record at " << a.position.to_string() << " lost";
    EXPECT_EQ(it->second, a.data) << a.position.to_string();
  }
}

// The log stopped: the error `e` an append got, sync() and close() all say
// Errc::failed with `errno_want` and its strerror, never EEXIST.
void expect_stopped(Log& log, const Error& e, int errno_want) {
  EXPECT_EQ(e.code, Errc::failed) << e.describe();
  EXPECT_EQ(e.sys_errno, errno_want) << e.describe();
  EXPECT_NE(e.message.find(std::strerror(errno_want)), std::string::npos) << e.describe();
  EXPECT_EQ(e.message.find(std::strerror(EEXIST)), std::string::npos) << e.describe();
  EXPECT_EQ(log.stats().failures, 1u);
  auto later = log.append("after the failure");
  ASSERT_FALSE(later.has_value());
  EXPECT_EQ(later.error().code, Errc::failed) << later.error().describe();
  auto sync = log.sync();
  ASSERT_FALSE(sync.has_value()) << "sync() succeeded on a stopped log";
  EXPECT_EQ(sync.error().code, Errc::failed) << sync.error().describe();
  EXPECT_EQ(sync.error().sys_errno, errno_want) << sync.error().describe();
  auto closed = log.close();
  ASSERT_FALSE(closed.has_value()) << "close() succeeded on a stopped log";
  EXPECT_EQ(closed.error().code, Errc::failed) << closed.error().describe();
}

// Issue 3 (and 1): EIO or EROFS from any step of making a segment stops the
// log at once, naming the errno and the file; with the temp file left
// behind (its unlink failed too), the error still names the first cause,
// not the EEXIST of a retry.
TEST(FsDeath, SegmentCreationErrorStopsTheLog) {
  struct Case {
    io::Op op;
    int err;
    int remove_err;
  };
  const Case cases[] = {
      {io::Op::open, EROFS, 0},       {io::Op::allocate, EIO, 0},     {io::Op::rename, EIO, 0},
      {io::Op::allocate, EIO, EROFS}, {io::Op::rename, EROFS, EROFS},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(op_name(c.op)) + " fails with " + std::strerror(c.err) +
                 (c.remove_err ? std::string(", unlink with ") + std::strerror(c.remove_err)
                               : std::string()));
    TempDir dir;
    Config cfg = small_config(dir.path());
    cfg.allocation_timeout = kLongWait;
    SpareFaults hook;
    hook.op = c.op;
    hook.err = c.err;
    hook.remove_err = c.remove_err;
    hook.from_id = 3;  // the log's first two segments are made
    std::vector<Acked> acked;
    {
      HookGuard guard(&hook);
      auto opened = Log::open(cfg);
      ASSERT_TRUE(opened.has_value()) << opened.error().describe();
      Log& log = **opened;
      auto errors = append_until_error(log, 2, &acked);
      ASSERT_EQ(errors.size(), 2u);
      EXPECT_GE(hook.fired(), 1);
      for (const Error& e : errors) {
        EXPECT_EQ(e.code, Errc::failed) << e.describe();
        EXPECT_EQ(e.sys_errno, c.err) << e.describe();
        EXPECT_NE(e.message.find(std::strerror(c.err)), std::string::npos) << e.describe();
        EXPECT_NE(e.message.find(seg::segment_file_name(3)), std::string::npos) << e.describe();
        EXPECT_EQ(e.message.find(std::strerror(EEXIST)), std::string::npos) << e.describe();
      }
      ASSERT_GT(acked.size(), 0u);
      expect_stopped(log, errors.front(), c.err);
      // One failed attempt: the log stopped instead of trying again.
      EXPECT_EQ(hook.fired(), 1);
    }
    expect_acked_replayed(cfg, acked);
  }
}

// ENOSPC, EDQUOT, EMFILE and ENFILE while making a segment are
// back-pressure: no_space after allocation_timeout naming the cause, the log
// is not failed, and appends resume once the condition clears.
TEST(FsDeath, ResourceShortageIsBackPressure) {
  struct Case {
    io::Op op;
    int err;
  };
  const Case cases[] = {
      {io::Op::allocate, ENOSPC},
      {io::Op::allocate, EDQUOT},
      {io::Op::open, EMFILE},
      {io::Op::open, ENFILE},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(op_name(c.op)) + " fails with " + std::strerror(c.err));
    TempDir dir;
    Config cfg = small_config(dir.path());
    cfg.allocation_timeout = 200ms;
    SpareFaults hook;
    hook.op = c.op;
    hook.err = c.err;
    hook.from_id = 3;
    HookGuard guard(&hook);
    auto opened = Log::open(cfg);
    ASSERT_TRUE(opened.has_value()) << opened.error().describe();
    Log& log = **opened;
    std::vector<Acked> acked;
    auto errors = append_until_error(log, 1, &acked);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors[0].code, Errc::no_space) << errors[0].describe();
    EXPECT_NE(errors[0].message.find(std::strerror(c.err)), std::string::npos)
        << errors[0].describe();
    EXPECT_EQ(log.stats().failures, 0u);
    EXPECT_TRUE(log.sync().has_value());
    hook.off.store(true);
    auto resumed = log.append("resumed");
    ASSERT_TRUE(resumed.has_value()) << resumed.error().describe();
    EXPECT_GE(resumed->segment(), 3u);
    EXPECT_TRUE(log.close().has_value());
  }
}

// Issue 2: an append waiting for a segment (creation held back by a full
// disk) when a sync fails is woken with Errc::failed and the sync's cause
// at once, never left to time out into no_space.
TEST(FsDeath, FailedSyncWakesAnAppendWaitingForASegment) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  // Appends do not wait for syncs, and no tick syncs during the test: the
  // one sync is the test's.
  cfg.mode = SyncMode::periodic;
  cfg.interval = std::chrono::microseconds(60'000'000);
  cfg.allocation_timeout = kLongWait;
  SpareFaults hook;
  hook.op = io::Op::allocate;
  hook.err = ENOSPC;
  hook.from_id = 3;
  HookGuard guard(&hook);
  auto opened = Log::open(cfg);
  ASSERT_TRUE(opened.has_value()) << opened.error().describe();
  Log& log = **opened;
  // Into segment 2, whose successor cannot be made (ENOSPC): from here on
  // only the writer below takes segments, and its stall is its wait for 3.
  for (int i = 0;; ++i) {
    auto pos = log.append(make_record(9, i, 1000));
    ASSERT_TRUE(pos.has_value()) << pos.error().describe();
    if (pos->segment() == 2) break;
  }
  ASSERT_TRUE(eventually([&] { return hook.fired() >= 1; }));
  const uint64_t stalls = log.stats().allocation_stalls;
  std::vector<Acked> acked;
  std::vector<Error> errors;
  std::thread writer([&] { errors = append_until_error(log, 1, &acked); });
  ASSERT_TRUE(eventually([&] { return log.stats().allocation_stalls > stalls; }));
  hook.fail_syncs.store(true);
  auto sync = log.sync();
  writer.join();
  ASSERT_FALSE(sync.has_value());
  EXPECT_EQ(sync.error().code, Errc::failed) << sync.error().describe();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code, Errc::failed) << errors[0].describe();
  EXPECT_EQ(errors[0].sys_errno, EIO) << errors[0].describe();
  EXPECT_NE(errors[0].message.find(std::strerror(EIO)), std::string::npos) << errors[0].describe();
  EXPECT_EQ(log.stats().failures, 1u);
  EXPECT_FALSE(log.close().has_value());
}

// A filesystem that dies under the log: the appenders, sync() and close()
// get Errc::failed with the filesystem's errno, never no_space or EEXIST.
// Appends do not wait for syncs (periodic mode, no tick during the test),
// so what stops them is the segment the log can no longer make.
void check_dying_filesystem(LoopFs& fs, const std::string& kill, std::initializer_list<int> errs) {
  Config cfg = small_config(fs.log_dir());
  cfg.mode = SyncMode::periodic;
  cfg.interval = std::chrono::microseconds(60'000'000);
  cfg.allocation_timeout = kLongWait;
  auto opened = Log::open(cfg);
  ASSERT_TRUE(opened.has_value()) << opened.error().describe();
  Log& log = **opened;
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(log.append(make_record(9, i, 1000)).has_value());
  ASSERT_TRUE(log.sync().has_value());
  ASSERT_EQ(std::system(kill.c_str()), 0) << kill;
  std::vector<Acked> acked;
  auto errors = append_until_error(log, 2, &acked);
  ASSERT_EQ(errors.size(), 2u);
  auto errno_ok = [&](int e) { return std::find(errs.begin(), errs.end(), e) != errs.end(); };
  for (const Error& e : errors) {
    EXPECT_EQ(e.code, Errc::failed) << e.describe();
    EXPECT_TRUE(errno_ok(e.sys_errno)) << e.describe();
    EXPECT_EQ(e.message.find(std::strerror(EEXIST)), std::string::npos) << e.describe();
  }
  EXPECT_EQ(log.stats().failures, 1u);
  auto sync = log.sync();
  ASSERT_FALSE(sync.has_value()) << "sync() succeeded on a dead filesystem";
  EXPECT_EQ(sync.error().code, Errc::failed) << sync.error().describe();
  EXPECT_TRUE(errno_ok(sync.error().sys_errno)) << sync.error().describe();
  auto closed = log.close();
  ASSERT_FALSE(closed.has_value()) << "close() succeeded on a dead filesystem";
  EXPECT_EQ(closed.error().code, Errc::failed) << closed.error().describe();
}

// A store into a mapped page of a filesystem that was shut down or turned
// read-only raises SIGBUS (the kernel refuses the page fault): only direct
// and buffered segments can report it as an error.
#define SKIP_MMAP()                                                                            \
  do {                                                                                         \
    if (small_config("/").segment_kind == SegmentKind::mmap)                                   \
      GTEST_SKIP() << "mmap segments get SIGBUS, not an error, on a dead filesystem (backend " \
                   << backend_under_test() << ")";                                             \
  } while (0)

#define MOUNT_OR_SKIP(fs)                                                                          \
  do {                                                                                             \
    if (!(fs).skip_reason().empty()) GTEST_SKIP() << "no loop filesystem: " << (fs).skip_reason(); \
  } while (0)

bool have_tool(const char* tool) {
  return std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) == 0;
}

TEST(FsDeath, XfsShutdown) {
  SKIP_MMAP();
  if (!have_tool("xfs_io")) GTEST_SKIP() << "xfs_io is not installed (xfsprogs)";
  // No reflink: mmap segments are refused on copy-on-write XFS.
  LoopFs fs("mkfs.xfs -q -f -m reflink=0", 4096);
  MOUNT_OR_SKIP(fs);
  check_dying_filesystem(fs, "xfs_io -x -c shutdown " + fs.mount().string(), {EIO});
}

TEST(FsDeath, Ext4RemountedReadOnlyOnError) {
  SKIP_MMAP();
  LoopFs fs("mkfs.ext4 -q -F -e remount-ro", 4096, 64ull << 20);
  MOUNT_OR_SKIP(fs);
  const auto trigger =
      std::filesystem::path("/sys/fs/ext4") / fs.device().filename() / "trigger_fs_error";
  if (!std::filesystem::exists(trigger)) {
    GTEST_SKIP() << trigger << " is missing (a kernel without ext4's trigger_fs_error)";
  }
  check_dying_filesystem(fs, "echo 1 > " + trigger.string(), {EROFS, EIO});
}

}  // namespace
}  // namespace synclog::test
