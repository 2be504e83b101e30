// Choosing a backend at startup: a backend this machine cannot run is a
// clear error, and backend=auto falls back and says which it chose. The
// machine's refusal is real: a seccomp filter in a child process makes
// io_uring_setup fail (as kernel.io_uring_disabled or a container policy
// would), or makes O_DIRECT opens fail (as a filesystem without direct I/O).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <fstream>
#include <functional>

#include "io/align.h"
#include "io/filesystem.h"
#include "sync/auto_order.h"
#include "sync/direct_sync.h"
#include "test_util.h"

namespace synclog {
// gtest prints a backend in a failed assertion by its config name.
inline void PrintTo(BackendKind k, std::ostream* os) { *os << to_string(k); }
}  // namespace synclog

namespace synclog::test {
namespace {

enum class Refuse { uring, direct_io };

// Runs `body` in a child process under a seccomp filter; the child's exit
// code is the number of failed checks.
int run_refused(Refuse what, const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<sock_filter> prog;
    prog.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
    if (what == Refuse::uring) {
      prog.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1));
      prog.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)));
    } else {
      // openat(dirfd, path, flags): refuse flags with O_DIRECT.
      prog.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_openat, 0, 3));
      prog.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[2])));
      prog.push_back(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, O_DIRECT, 0, 1));
      prog.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EINVAL & SECCOMP_RET_DATA)));
    }
    prog.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    sock_fprog fprog{static_cast<unsigned short>(prog.size()), prog.data()};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        ::syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0) {
      std::perror("seccomp");
      ::_exit(100);
    }
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200;
}

int check(bool ok, const std::string& what) {
  if (!ok) std::fprintf(stderr, "check failed: %s\n", what.c_str());
  return ok ? 0 : 1;
}

TEST(BackendSelect, UringRefusedIsAClearErrorAndAutoFallsBack) {
  TempDir dir;
  int failures = run_refused(Refuse::uring, [&] {
    int bad = 0;
    Config cfg = small_config(dir.path());
    cfg.backend = BackendKind::uring;
    cfg.segment_kind = SegmentKind::direct;
    // fd 0 is the embedding process's: a failed ring setup must not close it.
    const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    bad += check(devnull >= 0 && ::dup2(devnull, 0) == 0, "stdin onto /dev/null");
    auto log = Log::open(cfg);
    bad += check(::fcntl(0, F_GETFD) != -1, "a refused io_uring open closed fd 0");
    bad += check(!log && log.error().code == Errc::unsupported, "uring refused");
    if (!log) {
      bad += check(log.error().message.find("io_uring is not available") != std::string::npos,
                   log.error().message);
    }
    cfg.backend = BackendKind::auto_select;
    auto fallback = Log::open(cfg);
    if (fallback) {
      const std::string& b = (*fallback)->backend();
      bad += check(b.find("backend=auto chose") != std::string::npos, b);
      bad += check(b.find("uring: io_uring is not available") != std::string::npos, b);
      bad += check(b.rfind("uring", 0) != 0, "auto must not pick uring: " + b);
      bad += check((*fallback)->append("works").has_value(), "append after fallback");
    } else {
      // No other direct backend in this build: the error lists what failed.
      bad += check(fallback.error().message.find("io_uring is not available") != std::string::npos,
                   fallback.error().message);
    }
    return bad;
  });
  EXPECT_EQ(failures, 0) << "see the child's stderr above";
}

TEST(BackendSelect, DirectIoRefusedByTheFilesystemIsAClearError) {
  TempDir dir;
  int failures = run_refused(Refuse::direct_io, [&] {
    Config cfg = small_config(dir.path());
    cfg.backend = BackendKind::uring;
    cfg.segment_kind = SegmentKind::direct;
    auto log = Log::open(cfg);
    int bad = check(!log && log.error().code == Errc::unsupported, "O_DIRECT refused");
    if (!log)
      bad += check(log.error().message.find("refuses O_DIRECT") != std::string::npos,
                   log.error().message);
    // Buffered and mmap segments do not need O_DIRECT.
    cfg.backend = BackendKind::pwrite;
    cfg.segment_kind = SegmentKind::buffered;
    bad += check(Log::open(cfg).has_value(), "pwrite without O_DIRECT");
    return bad;
  });
  EXPECT_EQ(failures, 0) << "see the child's stderr above";
}

TEST(BackendSelect, AutoSaysWhichItChose) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.backend = BackendKind::auto_select;
  cfg.segment_kind = SegmentKind::buffered;
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  EXPECT_EQ((*log)->backend(),
            "pwrite (backend=auto chose pwrite for buffered segments: the first that started in "
            "the order measured for batch mode on tmpfs (memory): pwrite)");
}

// The default config: backend=auto and segment_kind=auto pick the first
// backend of the order measured for the mode on the directory's medium,
// and the log runs (and reports in config()) what was chosen.
TEST(BackendSelect, DefaultIsTheMeasuredBestForTheMediumAndMode) {
  EXPECT_EQ(Config{}.backend, BackendKind::auto_select);
  EXPECT_EQ(Config{}.segment_kind, SegmentKind::auto_select);
  bool saw_memory = false;
  bool saw_disk = false;
  for (const std::string& base : {std::string("/dev/shm"), disk_base()}) {
    for (SyncMode mode : {SyncMode::batch, SyncMode::group, SyncMode::periodic}) {
      TempDir dir(base);
      auto fs = io::probe_filesystem(dir.path());
      ASSERT_TRUE(fs.has_value()) << fs.error().describe();
      (fs->memory ? saw_memory : saw_disk) = true;
      Config cfg;
      cfg.dir = dir.path();
      cfg.segment_size = 256 << 10;
      cfg.mode = mode;
      const sync::AutoOrder order = sync::auto_order(cfg, *fs);
      ASSERT_EQ(order.backends.size(), 5u) << order.basis;
      const BackendKind best = order.backends.front();
      auto log = Log::open(cfg);
      ASSERT_TRUE(log.has_value()) << log.error().describe();
      const std::string& b = (*log)->backend();
      const std::string chose = std::string(to_string(best)) + " (backend=auto chose " +
                                to_string(best) + " (" + to_string(segment_kind_for(best)) +
                                " segments): the first that started in the order measured for " +
                                to_string(mode) + " mode on " + fs->name;
      EXPECT_EQ(b.rfind(chose, 0), 0u) << b;
      EXPECT_EQ((*log)->config().backend, best);
      EXPECT_EQ((*log)->config().segment_kind, segment_kind_for(best));
      ASSERT_TRUE((*log)->append("default").has_value());
      ASSERT_TRUE((*log)->close().has_value());
      auto back = replay_all(cfg);
      ASSERT_TRUE(back.has_value()) << back.error().describe();
      ASSERT_EQ(back->size(), 1u);
      EXPECT_EQ((*back)[0].data, "default");
    }
  }
  EXPECT_TRUE(saw_memory) << "/dev/shm is not tmpfs here";
  if (!saw_disk) GTEST_SKIP() << disk_base() << " is memory too: the disk order is untested";
}

// The measured order per medium (docs/backends.md, "Which backend auto
// picks"). A change to the table must change this test and the page.
TEST(BackendSelect, MeasuredOrderPerMedium) {
  using enum BackendKind;
  const io::Filesystem ext4{0xEF53, "ext4", true, "", false};
  const io::Filesystem tmpfs{0x01021994, "tmpfs", true, "", true};
  const io::Filesystem xfs{0x58465342, "xfs", true, "", false};
  Config cfg;
  cfg.mode = SyncMode::batch;
  auto disk = sync::auto_order(cfg, ext4);
  EXPECT_EQ(disk.basis, "batch mode on ext4 (disk)");
  EXPECT_EQ(disk.backends, (std::vector{pwrite, aio, msync, msync_pool, uring}));
  auto ram = sync::auto_order(cfg, tmpfs);
  EXPECT_EQ(ram.basis, "batch mode on tmpfs (memory)");
  EXPECT_EQ(ram.backends, (std::vector{msync, msync_pool, pwrite, uring, aio}));
  // Not measured: the disk order, and the reason says so.
  auto other = sync::auto_order(cfg, xfs);
  EXPECT_EQ(other.backends, disk.backends);
  EXPECT_EQ(other.basis,
            "batch mode on xfs (not measured there: the order measured on an ext4 disk)");
  // An explicit segment kind keeps the measured order among its backends.
  cfg.segment_kind = SegmentKind::mmap;
  auto mmap = sync::auto_order(cfg, ext4);
  std::vector<BackendKind> want;
  for (BackendKind k : disk.backends)
    if (segment_kind_for(k) == SegmentKind::mmap) want.push_back(k);
  EXPECT_EQ(mmap.backends, want);
  cfg.segment_kind = SegmentKind::auto_select;
  cfg.mode = SyncMode::group;
  EXPECT_EQ(sync::auto_order(cfg, ext4).backends.front(), pwrite);
  EXPECT_EQ(sync::auto_order(cfg, tmpfs).backends.front(), msync);
  cfg.mode = SyncMode::periodic;
  EXPECT_EQ(sync::auto_order(cfg, ext4).backends.front(), uring);
  EXPECT_EQ(sync::auto_order(cfg, tmpfs).backends.front(), uring);
}

// With the default segment_kind, a refused backend is passed over for the
// next in the measured order even when that one syncs another segment
// kind, and the reason names what was passed over. Periodic mode on the
// disk has direct backends first; O_DIRECT refused rules out both.
TEST(BackendSelect, DefaultFallsBackAcrossSegmentKinds) {
  TempDir dir(disk_base());
  auto fs = io::probe_filesystem(dir.path());
  ASSERT_TRUE(fs.has_value()) << fs.error().describe();
  Config cfg;
  cfg.dir = dir.path();
  cfg.segment_size = 256 << 10;
  cfg.mode = SyncMode::periodic;
  const auto order = sync::auto_order(cfg, *fs).backends;
  ASSERT_EQ(segment_kind_for(order.front()), SegmentKind::direct)
      << "the measured order no longer starts with a direct backend here: test another row";
  BackendKind want = order.front();
  for (BackendKind k : order) {
    want = k;
    if (segment_kind_for(k) != SegmentKind::direct) break;
  }
  int failures = run_refused(Refuse::direct_io, [&] {
    int bad = 0;
    auto log = Log::open(cfg);
    bad += check(log.has_value(), log ? "" : log.error().describe());
    if (!log) return bad;
    const std::string& b = (*log)->backend();
    bad += check((*log)->config().backend == want, "chose " + b);
    bad += check((*log)->config().segment_kind == segment_kind_for(want), "segment kind " + b);
    bad += check(b.rfind(std::string(to_string(want)) + " (backend=auto chose ", 0) == 0, b);
    for (const char* passed : {"uring: ", "aio: "})
      bad +=
          check(b.find(passed) != std::string::npos && b.find("O_DIRECT") != std::string::npos, b);
    bad += check((*log)->append("works").has_value(), "append after fallback");
    return bad;
  });
  EXPECT_EQ(failures, 0) << "see the child's stderr above";
}

// Nothing of the explicit segment kind starts: one error lists each refusal.
TEST(BackendSelect, AutoWithNothingLeftNamesEveryRefusal) {
  TempDir dir;
  int failures = run_refused(Refuse::direct_io, [&] {
    Config cfg = small_config(dir.path());
    cfg.backend = BackendKind::auto_select;
    cfg.segment_kind = SegmentKind::direct;
    auto log = Log::open(cfg);
    int bad = check(!log && log.error().code == Errc::unsupported, "direct refused");
    if (!log) {
      const std::string& m = log.error().message;
      bad += check(m.rfind("backend=auto found no working backend for batch mode on tmpfs", 0) == 0,
                   m);
      bad +=
          check(m.find("uring: ") != std::string::npos && m.find("aio: ") != std::string::npos, m);
    }
    return bad;
  });
  EXPECT_EQ(failures, 0) << "see the child's stderr above";
}

// Path 5: RWF_DSYNC is trusted by filesystem type; tests/fuse_dsync_test.cc
// has the filesystem that does not honour it.
TEST(BackendSelect, Path5_DirectSyncFollowsTheFilesystem) {
  const std::filesystem::path dir = "/log";
  io::Filesystem honours{0xEF53, "ext4", true, ""};
  io::Filesystem fuse{0x65735546, "fuse", false, ""};
  auto a = sync::choose_direct_sync(DirectSync::auto_select, honours, dir);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->use, DirectSync::dsync);
  EXPECT_EQ(a->why, "direct_sync=dsync: RWF_DSYNC is honoured on ext4");
  auto b = sync::choose_direct_sync(DirectSync::auto_select, fuse, dir);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->use, DirectSync::fdatasync);
  EXPECT_EQ(b->why, "direct_sync=fdatasync: RWF_DSYNC is not known to be honoured on fuse");
  auto c = sync::choose_direct_sync(DirectSync::dsync, fuse, dir);
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code, Errc::unsupported);
  EXPECT_NE(c.error().message.find("not known to be honoured on fuse (/log)"), std::string::npos)
      << c.error().message;
  for (const auto& fs : {honours, fuse}) {
    auto d = sync::choose_direct_sync(DirectSync::fdatasync, fs, dir);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->use, DirectSync::fdatasync);
    EXPECT_EQ(d->why, "");
  }
}

TEST(BackendSelect, Path5_AutoDirectSyncIsNamedInBackend) {
  TempDir dir;  // tmpfs: no device cache, RWF_DSYNC trusted
  Config cfg = small_config(dir.path());
  cfg.backend = BackendKind::aio;
  cfg.segment_kind = SegmentKind::direct;
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  EXPECT_EQ((*log)->backend(), "aio (direct_sync=dsync: RWF_DSYNC is honoured on tmpfs)");
  cfg.backend = BackendKind::auto_select;
  ASSERT_TRUE((*log)->close().has_value());
  log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  EXPECT_NE((*log)->backend().find("; direct_sync=dsync: RWF_DSYNC is honoured on tmpfs)"),
            std::string::npos)
      << (*log)->backend();
}

TEST(BlockSize, PhysicalBlockRaisesTheProbedAlignment) {
  EXPECT_EQ(io::choose_block_size(0, 512, 4096), 4096u);  // 512e
  EXPECT_EQ(io::choose_block_size(0, 512, 512), 512u);
  EXPECT_EQ(io::choose_block_size(0, 4096, 4096), 4096u);  // 4Kn
  EXPECT_EQ(io::choose_block_size(0, 4096, 0), 4096u);     // no block device
  EXPECT_EQ(io::choose_block_size(0, 512, 0), 512u);
  EXPECT_EQ(io::choose_block_size(0, 512, 8192), 512u);      // above what the format supports
  EXPECT_EQ(io::choose_block_size(0, 512, 3000), 512u);      // not a power of two: not a sector
  EXPECT_EQ(io::choose_block_size(1024, 512, 4096), 1024u);  // configured wins
}

// tail=pad on a 512e device: a sync padded to 512 bytes ends mid physical
// sector, and the next sync makes the drive read-modify-write the sector
// holding acknowledged data. The build tree's disk says what it is.
TEST(BlockSize, DirectLogsOnTheDiskUseThePhysicalBlock) {
  TempDir dir(disk_base());
  struct stat st;
  ASSERT_EQ(::stat(dir.path().c_str(), &st), 0);
  uint32_t physical = 0;
  for (const char* rel : {"/queue/physical_block_size", "/../queue/physical_block_size"}) {
    std::ifstream f("/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" +
                    std::to_string(minor(st.st_dev)) + rel);
    if (f >> physical) break;
  }
  if (physical == 0) GTEST_SKIP() << dir.path() << " is not on a block device";
  if (physical > 4096) GTEST_SKIP() << "physical block of " << physical << " is above 4096";
  Config cfg = small_config(dir.path());
  cfg.backend = BackendKind::uring;
  cfg.segment_kind = SegmentKind::direct;
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  EXPECT_GE((*log)->block_size(), physical) << "physical block size " << physical;
  EXPECT_EQ((*log)->block_size() % physical, 0u);
}

}  // namespace
}  // namespace synclog::test
