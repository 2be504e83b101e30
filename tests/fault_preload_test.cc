// G4 with a real injected error: the pwrite backend's fdatasync fails with
// EIO through an LD_PRELOAD shim, in a child process, with no test seam in
// the library. The log fails stop; with on_sync_failure=abort the process
// aborts; everything acknowledged before is still there.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <sstream>

#include "test_util.h"

namespace synclog::test {
namespace {

struct ChildRun {
  std::string out;
  int status = 0;
};

ChildRun run_child(const std::filesystem::path& dir, const std::string& config, int fail_at) {
  const std::string cmd =
      "LD_PRELOAD=" FAIL_FDATASYNC_LIB " SYNCLOG_FAIL_FDATASYNC_AT=" + std::to_string(fail_at) +
      " " FAULT_CHILD_BIN " " + dir.string() + " '" + config + "' 2>&1";
  ChildRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) r.out.append(buf, n);
  r.status = ::pclose(p);
  return r;
}

const char* kPwrite = "backend=pwrite,segment_kind=buffered,mode=batch,segment_size=256KiB";

TEST(FaultPreload, FailedFdatasyncStopsTheLogAndLosesNothingAcknowledged) {
  TempDir dir;
  // fdatasync #1 makes the first segment, #2 the spare; #40 is a record's.
  ChildRun r = run_child(dir.path(), kPwrite, 40);
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.out;
  EXPECT_NE(r.out.find("error failed: the log stopped after a failed sync"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Input/output error"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("again failed:"), std::string::npos) << "a later append was acked:\n"
                                                            << r.out;
  std::istringstream lines(r.out);
  std::vector<std::string> acked;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("acked ", 0) == 0)
      acked.push_back("record " + line.substr(6, line.find(' ', 6) - 6));
  }
  ASSERT_GT(acked.size(), 5u);
  Config cfg = *Config::parse(kPwrite);
  cfg.dir = dir.path();
  auto replayed = replay_all(cfg);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  ASSERT_GE(replayed->size(), acked.size());
  for (size_t i = 0; i < acked.size(); ++i) EXPECT_EQ((*replayed)[i].data, acked[i]);
}

TEST(FaultPreload, AbortPolicyAbortsTheProcess) {
  TempDir dir;
  ChildRun r = run_child(dir.path(), std::string(kPwrite) + ",on_sync_failure=abort", 40);
  ASSERT_TRUE(WIFSIGNALED(r.status) || (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 134))
      << "status " << r.status << "\n"
      << r.out;
  EXPECT_NE(r.out.find("sync failed, aborting (on_sync_failure=abort)"), std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace synclog::test
