// aio backend: bytes of the segment image reach the file whole-block aligned
// for ranges with odd boundaries, on tmpfs and on disk, in both durability
// variants; bad block sizes are refused; a write the kernel refuses (read-only
// file) or cuts short and then fails (RLIMIT_FSIZE) comes back as an Error
// naming the file, the offset and errno. A machine without kernel AIO or
// O_DIRECT on the medium skips.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/align.h"
#include "io/file.h"
#include "io/hook.h"
#include "segments/format.h"
#include "segments/segment.h"
#include "sync/aio_backend.h"
#include "test_util.h"

namespace synclog::sync {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMiB = 1 << 20;

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

std::byte pattern(uint64_t segment_id, uint64_t offset, int round) {
  return static_cast<std::byte>((offset * 131 + segment_id * 7 + round * 29) % 251 + 1);
}

std::vector<std::byte> read_file(const fs::path& path) {
  std::vector<std::byte> out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  std::byte buf[1 << 16];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.insert(out.end(), buf, buf + n);
  ::close(fd);
  return out;
}

class AioTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    dir_.emplace(std::string(GetParam()) == "shm" ? "/dev/shm" : test::disk_base());
    auto file = io::File::open(dir_->path() / "probe", io::File::Mode::create_new);
    ASSERT_TRUE(file.has_value()) << file.error().describe();
    auto align = io::probe_direct_io(file->path());
    if (!align) GTEST_SKIP() << align.error().message;
    block_ = align->alignment;
    auto probe = make_aio_backend(Config{}, block_, false);
    if (!probe && probe.error().code == Errc::unsupported) GTEST_SKIP() << probe.error().message;
    ASSERT_TRUE(probe.has_value()) << probe.error().describe();
  }

  std::unique_ptr<Backend> backend(bool use_fdatasync, uint32_t depth = 8) {
    Config config;
    config.queue_depth = depth;
    auto b = make_aio_backend(config, block_, use_fdatasync);
    EXPECT_TRUE(b.has_value()) << b.error().describe();
    return b ? std::move(*b) : nullptr;
  }

  // A pre-allocated segment file with its image open for direct I/O.
  std::unique_ptr<seg::Segment> segment(uint64_t id, uint64_t size) {
    const fs::path path = dir_->path() / seg::segment_file_name(id);
    {
      auto f = io::File::open(path, io::File::Mode::create_new);
      EXPECT_TRUE(f.has_value()) << f.error().describe();
      if (!f) return nullptr;
      EXPECT_TRUE(f->allocate(size).has_value());
    }
    auto s = std::make_unique<seg::Segment>(id, size, path);
    auto open = s->open_image(SegmentKind::direct, seg::SegmentHeader{id, size, block_, 99});
    EXPECT_TRUE(open.has_value()) << open.error().describe();
    return open ? std::move(s) : nullptr;
  }

  // Appender stand-in: fills [from, to) of the image.
  static void fill(seg::Segment& s, uint64_t from, uint64_t to, int round = 0) {
    for (uint64_t i = from; i < to; ++i) s.image()[i] = pattern(s.id(), i, round);
  }

  // The file holds the image's bytes up to `end` (header included) and zeros
  // past the block that holds `end`: nothing beyond the widened range was written.
  void expect_file(const seg::Segment& s, uint64_t end) {
    const auto file = read_file(s.path());
    ASSERT_EQ(file.size(), s.size());
    for (uint64_t i = 0; i < end; ++i) {
      ASSERT_EQ(file[i], s.image()[i]) << s.path() << " byte " << i;
    }
    for (uint64_t i = std::min(align_up(end, block_), s.size()); i < s.size(); ++i) {
      ASSERT_EQ(file[i], std::byte{0}) << s.path() << " byte " << i << " written past the range";
    }
  }

  std::optional<test::TempDir> dir_;
  uint32_t block_ = 0;
};

TEST_P(AioTest, OddRangesReachTheFile) {
  for (bool use_fdatasync : {false, true}) {
    for (uint32_t depth : {1u, 8u}) {
      SCOPED_TRACE(std::string(use_fdatasync ? "fdatasync" : "dsync") + " depth " +
                   std::to_string(depth));
      auto b = backend(use_fdatasync, depth);
      const uint64_t id = (use_fdatasync ? 10 : 20) + depth;
      auto s = segment(id, 4 * kMiB);
      ASSERT_TRUE(b && s);

      // Appends land one range at a time, as the driver hands them over.
      fill(*s, 64, 1000);
      Range first[] = {{s.get(), 64, 1000}};
      ASSERT_TRUE(b->persist(first).has_value());
      expect_file(*s, 1000);

      fill(*s, 1000, 3 * kMiB + 123);
      Range several[] = {{s.get(), 1000, 70000}, {s.get(), 70000, 3 * kMiB + 123}};
      auto p = b->persist(several);
      ASSERT_TRUE(p.has_value()) << p.error().describe();
      expect_file(*s, 3 * kMiB + 123);

      // The shared tail block is rewritten with its new bytes; the range
      // ends at the segment end.
      fill(*s, 3 * kMiB + 123, 4 * kMiB, 1);
      Range tail[] = {{s.get(), 3 * kMiB + 123, 4 * kMiB}};
      ASSERT_TRUE(b->persist(tail).has_value());
      expect_file(*s, 4 * kMiB);

      auto h = seg::decode_header(read_file(s->path()));
      ASSERT_TRUE(h.has_value()) << h.error().describe();
      EXPECT_EQ(h->segment_id, id);
    }
  }
}

TEST_P(AioTest, OneSyncAcrossSegments) {
  auto b = backend(false);
  auto s1 = segment(1, kMiB);
  auto s2 = segment(2, 2 * kMiB);
  ASSERT_TRUE(b && s1 && s2);
  fill(*s1, 64, kMiB);
  fill(*s2, 64, 5000);
  Range ranges[] = {{s1.get(), 64, kMiB}, {s2.get(), 64, 5000}, {s2.get(), 5000, 5000}};
  auto p = b->persist(ranges);
  ASSERT_TRUE(p.has_value()) << p.error().describe();
  expect_file(*s1, kMiB);
  expect_file(*s2, 5000);
}

TEST_P(AioTest, RangesOutOfOrder) {
  auto b = backend(false);
  auto s = segment(7, kMiB);
  ASSERT_TRUE(b && s);
  fill(*s, 64, 3 * block_ + 10);
  // A later range first, then one inside the block it ends in, then the start.
  Range ranges[] = {{s.get(), 2 * block_ + 7, 3 * block_ + 10},
                    {s.get(), 3 * block_ + 1, 3 * block_ + 2},
                    {s.get(), 64, 2 * block_ + 7}};
  auto p = b->persist(ranges);
  ASSERT_TRUE(p.has_value()) << p.error().describe();
  expect_file(*s, 3 * block_ + 10);
}

TEST_P(AioTest, RangePastTheSegmentIsRefused) {
  auto b = backend(false);
  auto s = segment(3, kMiB);
  ASSERT_TRUE(b && s);
  Range r[] = {{s.get(), 64, kMiB + 1}};
  auto p = b->persist(r);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code, Errc::invalid_argument);
  EXPECT_NE(p.error().message.find(s->path().string()), std::string::npos) << p.error().message;
}

TEST_P(AioTest, ReadOnlyFileIsReported) {
  auto b = backend(false);
  auto s = segment(4, kMiB);
  ASSERT_TRUE(b && s);
  // Swap a read-only descriptor in under the segment's fd number.
  int ro = ::open(s->path().c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(ro, 0);
  ASSERT_GE(::dup2(ro, s->file().fd()), 0);
  ::close(ro);
  fill(*s, 64, 9000);
  Range r[] = {{s.get(), 3 * block_ + 5, 3 * block_ + 900}};
  auto p = b->persist(r);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code, Errc::io_error);
  EXPECT_EQ(p.error().sys_errno, EBADF);
  const std::string& m = p.error().message;
  EXPECT_NE(m.find(s->path().string()), std::string::npos) << m;
  EXPECT_NE(m.find("at offset " + std::to_string(3 * block_)), std::string::npos) << m;
  EXPECT_NE(m.find(std::strerror(EBADF)), std::string::npos) << m;
}

// RLIMIT_FSIZE cuts a write short at the limit, and the resubmitted rest
// fails with EFBIG: the short-write path and a failed completion.
TEST_P(AioTest, FailedCompletionIsReported) {
  for (bool use_fdatasync : {false, true}) {
    auto b = backend(use_fdatasync);
    auto s = segment(use_fdatasync ? 6 : 5, 2 * kMiB);
    ASSERT_TRUE(b && s);
    fill(*s, 64, kMiB);
    rlimit old{};
    ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
    rlimit low = old;
    low.rlim_cur = kMiB / 2;
    auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &low), 0);
    Range r[] = {{s.get(), 64, kMiB}};  // one write, cut short at kMiB / 2
    auto p = b->persist(r);
    ::setrlimit(RLIMIT_FSIZE, &old);
    ::signal(SIGXFSZ, old_handler);
    ASSERT_FALSE(p.has_value());
    EXPECT_EQ(p.error().sys_errno, EFBIG) << p.error().describe();
    const std::string& m = p.error().message;
    EXPECT_NE(m.find(s->path().string()), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(kMiB / 2) + " bytes at offset " + std::to_string(kMiB / 2)),
              std::string::npos)
        << m;
    // The part before the limit was written and is not lost by the retry.
    const auto file = read_file(s->path());
    ASSERT_EQ(file.size(), 2 * kMiB);
    EXPECT_EQ(std::memcmp(file.data() + 64, s->image().data() + 64, kMiB / 2 - 64), 0);
  }
}

// Fails the fail_at-th direct write with EIO; records every one that completed.
class RecordingHook : public io::Hook {
 public:
  explicit RecordingHook(int fail_at) : fail_at_(fail_at) {}
  int before(const io::Event& e) override {
    if (e.op != io::Op::direct_write) return 0;
    return ++before_ == fail_at_ ? EIO : 0;
  }
  void after(const io::Event& e) override {
    if (e.op == io::Op::direct_write) done.push_back({e.path, e.offset, e.length});
  }
  struct Done {
    fs::path path;
    uint64_t offset, length;
  };
  std::vector<Done> done;
  int before_ = 0;

 private:
  const int fail_at_;
};

struct HookGuard {
  explicit HookGuard(io::Hook* h) { io::install_hook(h); }
  ~HookGuard() { io::install_hook(nullptr); }
};

TEST_P(AioTest, HookSeesEveryWriteAndCanFailOne) {
  for (uint32_t depth : {1u, 8u}) {
    SCOPED_TRACE("depth " + std::to_string(depth));
    auto b = backend(false, depth);
    auto s = segment(30 + depth, 4 * kMiB);
    ASSERT_TRUE(b && s);
    fill(*s, 64, 3 * kMiB);
    {
      RecordingHook hook(0);
      HookGuard guard(&hook);
      Range r[] = {{s.get(), 64, kMiB + 10}};
      ASSERT_TRUE(b->persist(r).has_value());
      // Completions may come in any order with several in flight.
      std::sort(hook.done.begin(), hook.done.end(),
                [](const auto& x, const auto& y) { return x.offset < y.offset; });
      uint64_t covered = 0;
      for (const auto& d : hook.done) {
        EXPECT_EQ(d.path, s->path());
        EXPECT_EQ(d.offset, covered);
        covered += d.length;
      }
      EXPECT_EQ(covered, align_up(kMiB + 10, block_));
    }
    // Three 1 MiB writes; the second fails. With depth 8 the first is still
    // in flight when the failure is seen: persist waits for it.
    RecordingHook hook(2);
    HookGuard guard(&hook);
    Range r[] = {{s.get(), 64, 3 * kMiB}};
    auto p = b->persist(r);
    ASSERT_FALSE(p.has_value());
    EXPECT_EQ(p.error().sys_errno, EIO);
    const std::string& m = p.error().message;
    EXPECT_NE(m.find("at offset " + std::to_string(kMiB)), std::string::npos) << m;
    EXPECT_NE(m.find(std::strerror(EIO)), std::string::npos) << m;
    // Nothing was tried after the failure, and the failed write never ran.
    EXPECT_EQ(hook.before_, 2);
    ASSERT_EQ(hook.done.size(), 1u);
    EXPECT_EQ(hook.done[0].offset, 0u);
  }
}

// Closed backends leave their kernel context for reuse; a forked child has
// none of them and must set up its own.
TEST_P(AioTest, ForkedChildGetsItsOwnContext) {
  { ASSERT_TRUE(backend(false)); }
  auto s = segment(40, kMiB);
  ASSERT_TRUE(s);
  fill(*s, 64, 5000);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto b = make_aio_backend(Config{}, block_, false);
    Range r[] = {{s.get(), 64, 5000}};
    ::_exit(b && (*b)->persist(r).has_value() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  expect_file(*s, 5000);
  // And the parent still writes through its reused context.
  auto b = backend(false);
  fill(*s, 5000, 9000);
  Range r[] = {{s.get(), 5000, 9000}};
  ASSERT_TRUE(b && b->persist(r).has_value());
  expect_file(*s, 9000);
}

INSTANTIATE_TEST_SUITE_P(Media, AioTest, ::testing::Values("shm", "disk"));

TEST(AioFactory, BadBlockSizeIsRefused) {
  for (uint32_t bad : {0u, 1u, 256u, 1000u, 4095u, 4097u}) {
    auto b = make_aio_backend(Config{}, bad);
    ASSERT_FALSE(b.has_value()) << bad;
    EXPECT_EQ(b.error().code, Errc::invalid_argument);
    EXPECT_NE(b.error().message.find("block size " + std::to_string(bad)), std::string::npos)
        << b.error().message;
  }
}

TEST(AioFactory, QueueDepthBeyondAioMaxNrIsUnsupported) {
  uint64_t max_nr = 0;
  std::ifstream("/proc/sys/fs/aio-max-nr") >> max_nr;
  if (max_nr == 0 || max_nr >= (1u << 22)) GTEST_SKIP() << "fs.aio-max-nr is " << max_nr;
  Config config;
  config.queue_depth = static_cast<uint32_t>(max_nr + 1);
  auto b = make_aio_backend(config, 4096);
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error().code, Errc::unsupported);
  EXPECT_NE(b.error().message.find("aio"), std::string::npos) << b.error().message;
  EXPECT_EQ(b.error().sys_errno, EAGAIN) << b.error().describe();
}

TEST(AioFactory, NameAndVariantFromConfig) {
  Config config;
  config.direct_sync = DirectSync::fdatasync;
  auto b = make_aio_backend(config, 4096);
  if (!b && b.error().code == Errc::unsupported) GTEST_SKIP() << b.error().message;
  ASSERT_TRUE(b.has_value()) << b.error().describe();
  EXPECT_STREQ((*b)->name(), "aio");
}

}  // namespace
}  // namespace synclog::sync
