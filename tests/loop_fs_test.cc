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

}  // namespace
}  // namespace synclog::test
