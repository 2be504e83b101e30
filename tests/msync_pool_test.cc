// msync-pool backend: slicing, hand-off and error paths, on a ramdisk
// (/dev/shm) and a real disk (the build tree), with 1, 2 and 4 workers.
//
// Reading the file back only shows that persist() corrupts nothing: the
// mapping and pread share the page cache. Durability is checked with
// cachestat(2) (Linux 6.5+) on the disk medium: after persist() no page of
// the range may be dirty or under writeback. A kernel without it skips that
// check. The error tests unmap a page of a segment's image behind its back
// (test-only fault injection) so that msync fails with ENOMEM.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "io/file.h"
#include "io/mapping.h"
#include "segments/format.h"
#include "segments/segment.h"
#include "sync/msync_pool_backend.h"
#include "test_util.h"

namespace synclog::test {
namespace {

using sync::Range;

constexpr uint64_t kSegSize = 8ull << 20;

std::byte pattern(uint64_t offset, uint32_t round) {
  uint64_t x = (offset + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t{round} << 32);
  return static_cast<std::byte>((x >> 29) ^ round);
}

// A segment file of kSegSize bytes with a shared mapping, as the manager
// would make it for SegmentKind::mmap.
std::unique_ptr<seg::Segment> make_segment(const std::filesystem::path& dir, uint64_t id) {
  const auto path = dir / seg::segment_file_name(id);
  {
    auto f = io::File::open(path, io::File::Mode::create_new);
    EXPECT_TRUE(f.has_value()) << f.error().describe();
    if (!f) return nullptr;
    auto a = f->allocate(kSegSize);
    EXPECT_TRUE(a.has_value()) << a.error().describe();
  }
  auto s = std::make_unique<seg::Segment>(id, kSegSize, path);
  seg::SegmentHeader h{id, kSegSize, 4096, 7};
  auto r = s->open_image(SegmentKind::mmap, h);
  EXPECT_TRUE(r.has_value()) << r.error().describe();
  if (!r) return nullptr;
  return s;
}

void fill(seg::Segment& s, uint64_t from, uint64_t to, uint32_t round) {
  auto img = s.image();
  for (uint64_t i = from; i < to; ++i) img[i] = pattern(i, round);
}

// Reads [from, to) of the segment's file with pread and compares it with the
// pattern of `round`.
void expect_file_holds(const seg::Segment& s, uint64_t from, uint64_t to, uint32_t round) {
  auto f = io::File::open(s.path(), io::File::Mode::read);
  ASSERT_TRUE(f.has_value()) << f.error().describe();
  std::vector<std::byte> buf(to - from);
  auto n = f->read_at(from, buf);
  ASSERT_TRUE(n.has_value()) << n.error().describe();
  ASSERT_EQ(*n, buf.size());
  for (uint64_t i = from; i < to; ++i) {
    if (buf[i - from] != pattern(i, round)) {
      FAIL() << s.path() << " byte " << i << " differs (round " << round << ")";
    }
  }
}

// cachestat(2): page-cache state of a file range. Declared here because the
// build's kernel headers predate it.
struct CacheStatRange {
  uint64_t off;
  uint64_t len;
};
struct CacheStat {
  uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

// Dirty + writeback pages of [from, to) widened to pages; nullopt if the
// kernel has no cachestat.
std::optional<uint64_t> unclean_pages(const seg::Segment& s, uint64_t from, uint64_t to) {
#if defined(__x86_64__)
  const uint64_t page = io::page_size();
  const uint64_t start = from & ~(page - 1);
  CacheStatRange range{start, to - start};
  CacheStat cs{};
  if (::syscall(451, s.file().fd(), &range, &cs, 0) != 0) return std::nullopt;
  return cs.nr_dirty + cs.nr_writeback;
#else
  (void)s, (void)from, (void)to;
  return std::nullopt;
#endif
}

std::unique_ptr<sync::Backend> make_pool(uint32_t threads,
                                         uint64_t min_slice = sync::kMsyncPoolMinSlice) {
  auto b = sync::make_msync_pool_backend(threads, min_slice);
  EXPECT_TRUE(b.has_value()) << b.error().describe();
  return b ? std::move(*b) : nullptr;
}

struct Medium {
  const char* name;
  bool disk;
};

struct PoolCase {
  Medium medium;
  uint32_t threads;
};

void PrintTo(const PoolCase& c, std::ostream* os) {
  *os << c.medium.name << " with " << c.threads << " workers";
}

std::string case_name(const testing::TestParamInfo<PoolCase>& info) {
  return std::string(info.param.medium.name) + "_" + std::to_string(info.param.threads) + "workers";
}

class MsyncPool : public testing::TestWithParam<PoolCase> {
 protected:
  MsyncPool() : dir_(GetParam().medium.disk ? disk_base() : "/dev/shm") {}

  bool disk() const { return GetParam().medium.disk; }

  // Writes round `round` into each range, persists them together, checks
  // the file and (on disk) that nothing in them is left dirty.
  void write_and_persist(sync::Backend& pool, std::span<const Range> ranges, uint32_t round) {
    for (const Range& r : ranges) fill(*r.segment, r.from, r.to, round);
    auto p = pool.persist(ranges);
    ASSERT_TRUE(p.has_value()) << p.error().describe();
    for (const Range& r : ranges) {
      if (r.to <= r.from) continue;
      expect_file_holds(*r.segment, r.from, r.to, round);
      if (!disk()) continue;
      if (auto dirty = unclean_pages(*r.segment, r.from, r.to)) {
        EXPECT_EQ(*dirty, 0u) << "round " << round << ": pages of [" << r.from << ", " << r.to
                              << ") still dirty after persist";
      }
    }
  }

  TempDir dir_;
};

TEST_P(MsyncPool, PersistsRangesOfEverySize) {
  auto pool = make_pool(GetParam().threads);
  ASSERT_NE(pool, nullptr);
  EXPECT_STREQ(pool->name(), "msync-pool");
  auto s = make_segment(dir_.path(), 1);
  ASSERT_NE(s, nullptr);
  const std::pair<uint64_t, uint64_t> cases[] = {
      {64, 72},                         // tiny
      {100, 4000},                      // within one page
      {4095, 4097},                     // across a page boundary
      {4097, 70001},                    // unaligned, about one slice
      {12345, 12345 + 129 * 1024},      // just over two minimum slices
      {64, kSegSize},                   // the whole segment
      {777, (6ull << 20) + 333},        // several MiB, unaligned at both ends
      {kSegSize - 5000, kSegSize - 8},  // the tail
  };
  uint32_t round = 1;
  for (auto [from, to] : cases) {
    SCOPED_TRACE("range [" + std::to_string(from) + ", " + std::to_string(to) + ")");
    const Range r{s.get(), from, to};
    write_and_persist(*pool, {&r, 1}, round++);
  }
}

TEST_P(MsyncPool, PersistsRangesAcrossSegments) {
  // What the driver passes after a segment switch: the sealed segment's tail
  // and the new segment's head, with empty ranges thrown in.
  auto pool = make_pool(GetParam().threads);
  ASSERT_NE(pool, nullptr);
  auto a = make_segment(dir_.path(), 1);
  auto b = make_segment(dir_.path(), 2);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const Range ranges[] = {
      {a.get(), 1000, 3ull << 20},
      {b.get(), 5000, 5000},  // empty
      {b.get(), 64, (1ull << 20) + 3},
      {a.get(), 4000, 100},  // backwards: nothing to do
  };
  write_and_persist(*pool, ranges, 1);
  const Range small[] = {{a.get(), (3ull << 20), (3ull << 20) + 10},
                         {b.get(), 2ull << 20, (2ull << 20) + 4096}};
  write_and_persist(*pool, small, 2);
}

TEST_P(MsyncPool, FineSlicesCoverEveryByte) {
  // A one-page minimum slice forces a hand-off for almost every persist,
  // with cuts landing in every position relative to range boundaries.
  auto pool = make_pool(GetParam().threads, io::page_size());
  ASSERT_NE(pool, nullptr);
  auto a = make_segment(dir_.path(), 1);
  auto b = make_segment(dir_.path(), 2);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::mt19937_64 rng(42);
  const int rounds = disk() ? 60 : 400;
  for (int i = 0; i < rounds; ++i) {
    auto pick = [&](uint64_t max_len) {
      const uint64_t from = 64 + rng() % (kSegSize / 2);
      return std::pair{from, from + rng() % max_len};
    };
    auto [f1, t1] = pick(200'000);
    auto [f2, t2] = pick(50'000);
    const Range ranges[] = {{a.get(), f1, t1}, {b.get(), f2, t2}};
    SCOPED_TRACE("round " + std::to_string(i));
    write_and_persist(*pool, ranges, static_cast<uint32_t>(i + 1));
    if (HasFatalFailure()) return;
  }
}

TEST_P(MsyncPool, ManyPersistsInALoop) {
  // Shakes out hand-off races: back-to-back persists find the workers still
  // spinning, and every so often a pause lets them park so the next persist
  // must wake them. Mixes persists the caller does alone with split ones.
  auto pool = make_pool(GetParam().threads, 16 * 1024);
  ASSERT_NE(pool, nullptr);
  auto s = make_segment(dir_.path(), 1);
  ASSERT_NE(s, nullptr);
  std::mt19937_64 rng(7);
  const int rounds = disk() ? 300 : 3000;
  std::vector<std::byte> expect(kSegSize);
  auto img = s->image();
  for (int i = 0; i < rounds; ++i) {
    const uint64_t from = 64 + rng() % (kSegSize - 64);
    const uint64_t len = (i % 3 == 0) ? rng() % 512 : rng() % (512 * 1024);
    const uint64_t to = std::min(kSegSize, from + len);
    const auto round = static_cast<uint32_t>(i + 1);
    for (uint64_t o = from; o < to; ++o) img[o] = expect[o] = pattern(o, round);
    const Range r{s.get(), from, to};
    auto p = pool->persist({&r, 1});
    ASSERT_TRUE(p.has_value()) << "round " << i << ": " << p.error().describe();
    if (disk()) {
      if (auto dirty = unclean_pages(*s, from, to)) {
        ASSERT_EQ(*dirty, 0u) << "round " << i << ": [" << from << ", " << to << ") still dirty";
      }
    }
    if (i % 97 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  auto f = io::File::open(s->path(), io::File::Mode::read);
  ASSERT_TRUE(f.has_value());
  std::vector<std::byte> got(kSegSize);
  auto n = f->read_at(0, got);
  ASSERT_TRUE(n.has_value());
  ASSERT_EQ(*n, kSegSize);
  EXPECT_TRUE(std::memcmp(got.data() + 64, expect.data() + 64, kSegSize - 64) == 0);
}

TEST_P(MsyncPool, WorkerErrorIsReportedAfterAllSlicesFinish) {
  // Two 1 MiB ranges in two segments, cut into threads + 1 slices; a hole
  // in the last slice (a worker's) makes its msync fail with ENOMEM.
  auto pool = make_pool(GetParam().threads);
  ASSERT_NE(pool, nullptr);
  auto a = make_segment(dir_.path(), 1);
  auto b = make_segment(dir_.path(), 2);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const uint64_t page = io::page_size();
  const Range ranges[] = {{a.get(), 0, 1ull << 20}, {b.get(), 0, 1ull << 20}};
  for (const Range& r : ranges) fill(*r.segment, r.from, r.to, 1);
  std::byte* hole = b->image().data() + (1ull << 20) - 2 * page;
  ASSERT_EQ(::munmap(hole, page), 0) << std::strerror(errno);

  auto p = pool->persist(ranges);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code, Errc::io_error);
  EXPECT_EQ(p.error().sys_errno, ENOMEM);
  EXPECT_NE(p.error().message.find(b->path().string()), std::string::npos) << p.error().message;
  // The slices without the hole were still done.
  if (disk()) {
    if (auto dirty = unclean_pages(*a, 0, 1ull << 20)) {
      EXPECT_EQ(*dirty, 0u);
    }
  }
  // The pool is not wedged: the next persist of healthy ranges works.
  const Range ok[] = {{a.get(), 0, 1ull << 20}};
  write_and_persist(*pool, ok, 2);
}

TEST_P(MsyncPool, FirstFailedSliceWins) {
  // Holes in slice 0 (the caller's, segment a) and in the last slice (a
  // worker's, segment b): the error names segment a.
  auto pool = make_pool(GetParam().threads);
  ASSERT_NE(pool, nullptr);
  auto a = make_segment(dir_.path(), 1);
  auto b = make_segment(dir_.path(), 2);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const uint64_t page = io::page_size();
  const Range ranges[] = {{a.get(), 0, 1ull << 20}, {b.get(), 0, 1ull << 20}};
  ASSERT_EQ(::munmap(a->image().data() + page, page), 0) << std::strerror(errno);
  ASSERT_EQ(::munmap(b->image().data() + (1ull << 20) - 2 * page, page), 0) << std::strerror(errno);
  for (int i = 0; i < 3; ++i) {
    auto p = pool->persist(ranges);
    ASSERT_FALSE(p.has_value());
    EXPECT_EQ(p.error().sys_errno, ENOMEM);
    EXPECT_NE(p.error().message.find(a->path().string()), std::string::npos) << p.error().message;
    EXPECT_EQ(p.error().message.find(b->path().string()), std::string::npos) << p.error().message;
  }
}

TEST_P(MsyncPool, CallerAloneErrorNamesTheSegment) {
  // A small persist never leaves the caller; its error still names the file.
  auto pool = make_pool(GetParam().threads);
  ASSERT_NE(pool, nullptr);
  auto s = make_segment(dir_.path(), 3);
  ASSERT_NE(s, nullptr);
  const uint64_t page = io::page_size();
  ASSERT_EQ(::munmap(s->image().data() + 4 * page, page), 0) << std::strerror(errno);
  const Range r{s.get(), 4 * page + 10, 4 * page + 20};
  auto p = pool->persist({&r, 1});
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().sys_errno, ENOMEM);
  EXPECT_NE(p.error().message.find(s->path().string()), std::string::npos) << p.error().message;
}

INSTANTIATE_TEST_SUITE_P(Media, MsyncPool,
                         testing::Values(PoolCase{{"shm", false}, 1}, PoolCase{{"shm", false}, 2},
                                         PoolCase{{"shm", false}, 4}, PoolCase{{"disk", true}, 1},
                                         PoolCase{{"disk", true}, 2}, PoolCase{{"disk", true}, 4}),
                         case_name);

TEST(MsyncPoolDisk, DirtyProbeSeesWhatPersistCleans) {
  // Shows that the cachestat check above has teeth: freshly written pages
  // of a disk file count as dirty, and a split persist leaves none.
  TempDir dir(disk_base());
  auto s = make_segment(dir.path(), 1);
  ASSERT_NE(s, nullptr);
  auto pool = make_pool(2);
  ASSERT_NE(pool, nullptr);
  const uint64_t from = 100, to = (2ull << 20) + 100;
  fill(*s, from, to, 1);
  auto before = unclean_pages(*s, from, to);
  if (!before) GTEST_SKIP() << "no cachestat(2) on this kernel";
  if (*before == 0) GTEST_SKIP() << "background writeback cleaned the pages first";
  const Range r{s.get(), from, to};
  ASSERT_TRUE(pool->persist({&r, 1}).has_value());
  EXPECT_EQ(unclean_pages(*s, from, to), 0u);
}

TEST(MsyncPoolConfig, RejectsZeroThreadsAndZeroSlice) {
  auto none = sync::make_msync_pool_backend(0);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code, Errc::invalid_argument);
  auto zero_slice = sync::make_msync_pool_backend(2, 0);
  ASSERT_FALSE(zero_slice.has_value());
  EXPECT_EQ(zero_slice.error().code, Errc::invalid_argument);
}

TEST(MsyncPoolConfig, StartsAndStopsWithoutWork) {
  for (uint32_t n : {1u, 4u, 64u}) {
    auto pool = make_pool(n);
    ASSERT_NE(pool, nullptr);
    EXPECT_TRUE(pool->persist({}).has_value());
  }
}

}  // namespace
}  // namespace synclog::test
