// Direct segments on a FUSE file system (issue 11, path 5): an io_uring or
// libaio O_DIRECT write with RWF_DSYNC completes there without any flush
// reaching the file system, so the log must not trust it. The file system
// is real: tests/fuse/flushfs, a libfuse3 passthrough that tracks which
// written bytes an fsync has covered. Needs root and /dev/fuse; without
// them each test is skipped and says why.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "segments/segment.h"
#include "test_util.h"

namespace synclog::test {
namespace {

constexpr long kFuseMagic = 0x65735546;

// flushfs mounted on a fresh directory for the lifetime of the object;
// unmounted (lazily if it must) and its daemon reaped on every exit path.
struct Faults {
  int release_delay_ms = 0;
  int fail_direct_open = 0;  // errno
};

class FlushFs {
 public:
  explicit FlushFs(Faults faults = Faults()) : backing_("/dev/shm"), mount_("/tmp") {
    if (std::strlen(FLUSHFS_BIN) == 0) {
      skip_ = "flushfs was not built (libfuse3-dev missing at configure time)";
      return;
    }
    if (::geteuid() != 0) {
      skip_ = "mounting a FUSE file system here needs root";
      return;
    }
    if (::access("/dev/fuse", R_OK | W_OK) != 0) {
      skip_ = std::string("/dev/fuse is not usable: ") + std::strerror(errno);
      return;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      if (faults.release_delay_ms)
        ::setenv("FLUSHFS_RELEASE_DELAY_MS", std::to_string(faults.release_delay_ms).c_str(), 1);
      if (faults.fail_direct_open)
        ::setenv("FLUSHFS_FAIL_DIRECT_OPEN", std::to_string(faults.fail_direct_open).c_str(), 1);
      ::execl(FLUSHFS_BIN, FLUSHFS_BIN, backing_.path().c_str(), mount_.path().c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      struct statfs st;
      if (::statfs(mount_.path().c_str(), &st) == 0 && st.f_type == kFuseMagic) {
        mounted_ = true;
        return;
      }
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        skip_ = "flushfs could not mount (exit status " + std::to_string(status) +
                "; see its stderr above)";
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    skip_ = "flushfs did not mount within 10 s";
  }

  ~FlushFs() {
    if (mounted_ && ::umount2(mount_.path().c_str(), 0) != 0)
      (void)::umount2(mount_.path().c_str(), MNT_DETACH);
    if (pid_ > 0) {
      // Unmounting ends the daemon; if it does not, it is ours to stop.
      int status = 0;
      for (int i = 0; i < 500 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (::waitpid(pid_, &status, WNOHANG) == 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
      }
    }
  }

  const std::string& skip_reason() const { return skip_; }
  std::filesystem::path mount() const { return mount_.path(); }
  std::filesystem::path backing() const { return backing_.path(); }

  // Byte ranges of `file` (under mount()) written and not yet fsynced.
  std::vector<std::pair<uint64_t, uint64_t>> unsynced(const std::filesystem::path& file) const {
    char buf[65536];
    ssize_t n = ::getxattr(file.c_str(), "user.flushfs.unsynced", buf, sizeof buf);
    EXPECT_GE(n, 0) << "getxattr " << file << ": " << std::strerror(errno);
    std::vector<std::pair<uint64_t, uint64_t>> out;
    std::istringstream in(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0));
    uint64_t from = 0, to = 0;
    char dash = 0;
    while (in >> from >> dash >> to) out.emplace_back(from, to);
    return out;
  }

 private:
  TempDir backing_;
  TempDir mount_;
  pid_t pid_ = -1;
  bool mounted_ = false;
  std::string skip_;
};

#define MOUNT_OR_SKIP(fs)                                                \
  do {                                                                   \
    if (!(fs).skip_reason().empty()) GTEST_SKIP() << (fs).skip_reason(); \
  } while (0)

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

Config fuse_config(const std::filesystem::path& dir, BackendKind backend) {
  Config cfg = small_config(dir);
  cfg.backend = backend;
  cfg.segment_kind = SegmentKind::direct;
  cfg.mode = SyncMode::batch;
  return cfg;
}

// Appends in batch mode with the default direct_sync and checks, after each
// acknowledgement, that the record's bytes reached the file system and that
// no byte of its segment up to the record's end is still waiting for an
// fsync there.
void check_acknowledged_records_were_fsynced(BackendKind backend) {
  FlushFs fs;
  MOUNT_OR_SKIP(fs);
  const auto dir = fs.mount() / "log";
  std::filesystem::create_directory(dir);
  auto log = Log::open(fuse_config(dir, backend));
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  const std::string& described = (*log)->backend();
  EXPECT_NE(described.find("direct_sync=fdatasync"), std::string::npos) << described;
  EXPECT_NE(described.find("fuse"), std::string::npos) << described;

  const int records = scaled(300);
  int unsynced_acks = 0;
  int missing = 0;
  for (int i = 0; i < records; ++i) {
    const std::string rec = make_record(0, static_cast<uint64_t>(i), 64 + (i * 97) % 3000);
    auto pos = (*log)->append(rec);
    ASSERT_TRUE(pos.has_value()) << pos.error().describe();
    const std::string name = seg::segment_file_name(pos->segment());
    const uint64_t end = pos->offset() + seg::kRecordHeaderSize + rec.size();
    for (auto [from, to] : fs.unsynced(dir / name)) {
      if (from < end) {
        if (unsynced_acks++ < 5) {
          ADD_FAILURE() << "record " << i << " at " << pos->to_string() << " acknowledged while "
                        << name << " bytes [" << from << ", " << to
                        << ") were written but not fsynced";
        }
        break;
      }
    }
    const std::string on_fs = read_file(fs.backing() / "log" / name);
    if (on_fs.size() < end || on_fs.compare(end - rec.size(), rec.size(), rec) != 0) {
      if (missing++ < 5) ADD_FAILURE() << "record " << i << " did not reach the file system";
    }
  }
  EXPECT_EQ(unsynced_acks, 0) << "of " << records << " acknowledged records";
  EXPECT_EQ(missing, 0) << "of " << records << " acknowledged records";
  ASSERT_TRUE((*log)->close().has_value());
}

TEST(FuseDsync, Path5_UringAcknowledgesOnlyFsyncedRecords) {
  check_acknowledged_records_were_fsynced(BackendKind::uring);
}

TEST(FuseDsync, Path5_AioAcknowledgesOnlyFsyncedRecords) {
  check_acknowledged_records_were_fsynced(BackendKind::aio);
}

TEST(FuseDsync, Path5_ExplicitDsyncIsRefusedNamingTheFilesystem) {
  FlushFs fs;
  MOUNT_OR_SKIP(fs);
  for (BackendKind backend : {BackendKind::uring, BackendKind::aio}) {
    SCOPED_TRACE(to_string(backend));
    Config cfg = fuse_config(fs.mount(), backend);
    cfg.direct_sync = DirectSync::dsync;
    auto log = Log::open(cfg);
    ASSERT_FALSE(log.has_value()) << "direct_sync=dsync opened on FUSE: " << (*log)->backend();
    EXPECT_EQ(log.error().code, Errc::unsupported) << log.error().describe();
    EXPECT_NE(log.error().message.find("fuse"), std::string::npos) << log.error().message;
    EXPECT_NE(log.error().message.find("RWF_DSYNC"), std::string::npos) << log.error().message;
  }
}

// The direct-I/O probe must leave nothing that the directory scan of the
// same open can meet. A daemon that is slow to release a closed file (here
// on purpose) keeps an unlinked file as .fuse_hidden* for a while; a probe
// file created and unlinked by open made that open fail with "foreign file".
TEST(FuseProbe, OpeningAFreshDirectoryLeavesNothingForTheScan) {
  FlushFs fs({.release_delay_ms = 300});
  MOUNT_OR_SKIP(fs);
  Config cfg = fuse_config(fs.mount(), BackendKind::uring);
  cfg.direct_sync = DirectSync::fdatasync;
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  for (const auto& e : std::filesystem::directory_iterator(fs.mount())) {
    const std::string name = e.path().filename();
    EXPECT_NE(name.rfind(".fuse_hidden", 0), 0u) << "left in the log directory: " << name;
  }
  ASSERT_TRUE((*log)->append("one").has_value());
  ASSERT_TRUE((*log)->close().has_value());
}

// A failing open of the file used to probe O_DIRECT is an I/O error, not
// "the file system refuses O_DIRECT".
TEST(FuseProbe, AnIoErrorWhileProbingIsAnIoError) {
  FlushFs fs({.fail_direct_open = EIO});
  MOUNT_OR_SKIP(fs);
  Config cfg = fuse_config(fs.mount(), BackendKind::uring);
  cfg.direct_sync = DirectSync::fdatasync;
  auto log = Log::open(cfg);
  ASSERT_FALSE(log.has_value());
  EXPECT_EQ(log.error().code, Errc::io_error) << log.error().describe();
  EXPECT_EQ(log.error().sys_errno, EIO) << log.error().describe();
  EXPECT_EQ(log.error().message.find("refuses O_DIRECT"), std::string::npos) << log.error().message;
}

}  // namespace
}  // namespace synclog::test
