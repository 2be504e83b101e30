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
#include "sync/direct_sync.h"
#include "test_util.h"

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
  EXPECT_EQ((*log)->backend(), "pwrite (backend=auto chose pwrite for buffered segments)");
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
