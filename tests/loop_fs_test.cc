// Behaviour that depends on the device or the filesystem type, on real
// filesystems made on loop devices (tests/loop_fs.h). Each test skips,
// saying why, where loop devices or the mkfs tools are not available.
#include "loop_fs.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace synclog::test {
namespace {

#define MOUNT_OR_SKIP(fs)                                                \
  do {                                                                   \
    if (!(fs).skip_reason().empty()) GTEST_SKIP() << (fs).skip_reason(); \
  } while (0)

// A block_size below the device's alignment used to open, and the first
// sync then failed the log (EINVAL on the first direct write). It is found
// at open now.
TEST(LoopFs, BlockSizeBelowTheDeviceAlignmentIsRefusedAtOpen) {
  LoopFs fs("mkfs.ext4 -q -F -b 4096", 4096, 64ull << 20);
  MOUNT_OR_SKIP(fs);
  for (BackendKind backend : {BackendKind::uring, BackendKind::aio}) {
    SCOPED_TRACE(to_string(backend));
    Config cfg = small_config(fs.log_dir());
    cfg.backend = backend;
    cfg.segment_kind = SegmentKind::direct;
    cfg.block_size = 512;
    auto log = Log::open(cfg);
    if (log) {
      auto pos = (*log)->append("first");
      ADD_FAILURE() << "block_size=512 opened on a 4096-byte-sector device; the first append "
                    << (pos ? "succeeded" : "failed: " + pos.error().describe());
      continue;
    }
    EXPECT_EQ(log.error().code, Errc::unsupported) << log.error().describe();
    EXPECT_NE(log.error().message.find("block_size"), std::string::npos) << log.error().message;
    // The probed alignment works.
    cfg.block_size = 0;
    auto ok = Log::open(cfg);
    ASSERT_TRUE(ok.has_value()) << ok.error().describe();
    EXPECT_EQ((*ok)->block_size(), 4096u);
    EXPECT_TRUE((*ok)->append("works").has_value());
  }
}

// On copy-on-write storage fallocate reserves no space for overwrites, so a
// store into an mmap segment can raise SIGBUS when the filesystem fills up.
// mmap segments are refused there at open; direct and buffered ones work.
void check_cow_filesystem(const std::string& mkfs, const std::string& name, bool refuses_mmap) {
  LoopFs fs(mkfs, 512);
  MOUNT_OR_SKIP(fs);
  Config mmap = small_config(fs.log_dir());
  mmap.backend = BackendKind::msync;
  mmap.segment_kind = SegmentKind::mmap;
  {
    auto log = Log::open(mmap);
    if (refuses_mmap) {
      ASSERT_FALSE(log.has_value()) << "mmap segments opened on " << name;
      EXPECT_EQ(log.error().code, Errc::unsupported) << log.error().describe();
      EXPECT_NE(log.error().message.find(name), std::string::npos) << log.error().message;
      EXPECT_NE(log.error().message.find("copy-on-write"), std::string::npos)
          << log.error().message;
    } else {
      ASSERT_TRUE(log.has_value()) << log.error().describe();
      ASSERT_TRUE((*log)->append("mmap").has_value());
    }
  }
  for (auto [backend, kind] : {std::pair{BackendKind::uring, SegmentKind::direct},
                               std::pair{BackendKind::pwrite, SegmentKind::buffered}}) {
    SCOPED_TRACE(to_string(backend));
    const auto dir = fs.log_dir() / to_string(backend);
    std::filesystem::create_directory(dir);
    Config cfg = small_config(dir);
    cfg.backend = backend;
    cfg.segment_kind = kind;
    {
      auto log = Log::open(cfg);
      ASSERT_TRUE(log.has_value()) << log.error().describe();
      for (int i = 0; i < 200; ++i) {
        ASSERT_TRUE((*log)->append(make_record(0, static_cast<uint64_t>(i), 1000)).has_value());
      }
      ASSERT_TRUE((*log)->close().has_value());
    }
    auto replayed = replay_all(cfg);
    ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
    EXPECT_EQ(replayed->size(), 200u);
  }
}

TEST(LoopFs, MmapSegmentsAreRefusedOnBtrfs) {
  check_cow_filesystem("mkfs.btrfs -q -f", "btrfs", true);
}

TEST(LoopFs, MmapSegmentsAreRefusedOnXfsWithReflink) {
  check_cow_filesystem("mkfs.xfs -q -f -m reflink=1", "xfs", true);
}

TEST(LoopFs, MmapSegmentsWorkOnXfsWithoutReflink) {
  check_cow_filesystem("mkfs.xfs -q -f -m reflink=0", "xfs", false);
}

}  // namespace
}  // namespace synclog::test
