// Reading a log costs memory in proportion to the largest record, not to
// the segment size: open (recovery) and a full replay of a 1 GiB log with
// 256 MiB segments stay under 8 MiB of resident memory above what the
// process held before the open. Measured from /proc/self/status (VmHWM,
// the peak, reset through /proc/self/clear_refs).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "test_util.h"

namespace synclog::test {
namespace {

// A field of /proc/self/status in bytes ("VmRSS:  1234 kB").
uint64_t status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1)) * 1024;
  }
  ADD_FAILURE() << "no " << field << " in /proc/self/status";
  return 0;
}

// Makes VmHWM start again from the current resident size.
bool reset_peak() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return out.good();
}

constexpr uint64_t kSegment = 256ull << 20;
constexpr uint64_t kLog = 1ull << 30;
constexpr size_t kRecord = 64 << 10;

TEST(ReaderMemory, OpenAndReplayOfAGibibyteStayUnder8MiB) {
  if (kSanitized) GTEST_SKIP() << "sanitizers change resident memory; measured in release";
  // The disk, not tmpfs: a tmpfs mapping would count the spare segment the
  // open creates as resident.
  TempDir dir(disk_base());
  Config cfg;
  cfg.dir = dir.path();
  cfg.backend = BackendKind::msync;
  cfg.segment_size = kSegment;
  cfg.mode = SyncMode::periodic;
  cfg.prezero = false;
  cfg.recycle = false;
  // Written by a child process, so that nothing the writer allocated is
  // resident here, to be reused by the reader unseen.
  const uint64_t records = kLog / kRecord;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto log = Log::open(cfg);
    if (!log) _exit(2);
    for (uint64_t i = 0; i < records; ++i) {
      if (!(*log)->append(make_record(0, i, kRecord))) _exit(3);
    }
    _exit((*log)->close() ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer exited with " << status;
  ASSERT_TRUE(reset_peak()) << "cannot reset VmHWM through /proc/self/clear_refs";
  const uint64_t baseline = status_bytes("VmRSS");
  uint64_t read = 0;
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    ASSERT_GE((*log)->recovery().segments, kLog / kSegment);
    auto reader = (*log)->read();
    ASSERT_TRUE(reader.has_value());
    for (;;) {
      auto r = reader->next();
      ASSERT_TRUE(r.has_value()) << r.error().describe();
      if (!*r) break;
      uint32_t thread = 0;
      uint64_t seq = 0;
      const std::string_view bytes(reinterpret_cast<const char*>((*r)->data.data()),
                                   (*r)->data.size());
      ASSERT_TRUE(check_record(bytes, &thread, &seq));
      ASSERT_EQ(seq, read);
      ++read;
    }
    const uint64_t peak = status_bytes("VmHWM");
    EXPECT_LT(peak - baseline, 8ull << 20)
        << "peak " << (peak >> 10) << " KiB, baseline " << (baseline >> 10) << " KiB";
    std::printf("resident above baseline while opening and reading %llu MiB: %llu KiB\n",
                static_cast<unsigned long long>(read * kRecord >> 20),
                static_cast<unsigned long long>((peak - baseline) >> 10));
  }
  EXPECT_EQ(read, records);
}

}  // namespace
}  // namespace synclog::test
