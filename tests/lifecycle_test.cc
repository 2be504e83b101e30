// Segment life: release, recycling, the size limit and back-pressure.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>

#include "segments/segment.h"
#include "test_util.h"

namespace synclog::test {
namespace {

std::vector<uint64_t> segment_files(const std::filesystem::path& dir) {
  std::vector<uint64_t> ids;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    uint64_t id;
    if (seg::parse_segment_file_name(e.path().filename().string(), &id)) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Appends records until the log has moved into segment `id`.
std::vector<Position> fill_until_segment(Log& log, uint64_t id, uint32_t thread,
                                         std::vector<std::string>* kept = nullptr) {
  std::vector<Position> out;
  for (uint64_t i = 0;; ++i) {
    std::string rec = make_record(thread, i, 1000);
    auto pos = log.append(rec);
    EXPECT_TRUE(pos.has_value()) << pos.error().describe();
    if (!pos) return out;
    out.push_back(*pos);
    if (kept) kept->push_back(rec);
    if (pos->segment() >= id) return out;
  }
}

TEST(Lifecycle, ReleaseBeforeFreesExactlyTheWhollyReleasedSegments) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.recycle = false;
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value());
  auto pos = fill_until_segment(**log, 5, 1);
  ASSERT_FALSE(pos.empty());
  const uint64_t first = pos.front().segment();
  // A position inside segment first+3: segments first..first+2 lie wholly before it.
  Position cut;
  for (auto p : pos) {
    if (p.segment() == first + 3) {
      cut = p;
      break;
    }
  }
  ASSERT_TRUE((*log)->release_before(cut).has_value());
  auto files = segment_files(dir.path());
  for (uint64_t id = first; id < first + 3; ++id) {
    EXPECT_FALSE(std::binary_search(files.begin(), files.end(), id)) << "segment " << id << " kept";
  }
  EXPECT_TRUE(std::binary_search(files.begin(), files.end(), first + 3));
  EXPECT_TRUE(std::binary_search(files.begin(), files.end(), pos.back().segment()));
  // Replay now starts with the first record of segment first+3.
  auto recs = read_all(**log);
  ASSERT_FALSE(recs.empty());
  EXPECT_EQ(recs.front().position.segment(), first + 3);
  EXPECT_EQ((*log)->stats().segments_released, 3u);
  // The active segment is never released, whatever the caller asks.
  ASSERT_TRUE((*log)->release_before(Position(pos.back().segment() + 10, 0)).has_value());
  files = segment_files(dir.path());
  EXPECT_TRUE(std::binary_search(files.begin(), files.end(), pos.back().segment()));
  ASSERT_TRUE((*log)->append("still writable").has_value());
  ASSERT_TRUE((*log)->close().has_value());
  auto again = replay_all(cfg);
  ASSERT_TRUE(again.has_value());
  ASSERT_FALSE(again->empty());
  EXPECT_EQ(again->back().data, "still writable");
}

TEST(Lifecycle, ReusedDirectImageWritesZerosPastTheLastRecord) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  if (cfg.segment_kind != SegmentKind::direct) {
    GTEST_SKIP() << "only direct segments write whole blocks from a private image";
  }
  // rewrite: a sync's last block goes out partly filled, so the image bytes
  // past the sync marker reach the file.
  cfg.tail = TailPolicy::rewrite;
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  // Completed segments hand their images (full of records) to later spares.
  auto filled = fill_until_segment(**log, 6, 2);
  ASSERT_FALSE(filled.empty());
  auto pos = (*log)->append(make_record(2, 1'000'000, 100));
  ASSERT_TRUE(pos.has_value()) << pos.error().describe();
  const Position durable = (*log)->durable();
  ASSERT_EQ(durable.segment(), pos->segment());
  const uint64_t block = (*log)->block_size();
  const uint64_t block_end = (durable.offset() + block - 1) / block * block;
  std::ifstream in(dir.path() / seg::segment_file_name(pos->segment()), std::ios::binary);
  std::string bytes(block_end - durable.offset(), 'x');
  in.seekg(static_cast<std::streamoff>(durable.offset()));
  ASSERT_TRUE(in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())));
  // Recovery takes zeros past the last record as the clean end of the log;
  // an earlier segment's records there would read as a torn tail.
  EXPECT_EQ(bytes, std::string(bytes.size(), '\0'))
      << "segment " << pos->segment() << " has non-zero bytes after its durable end "
      << durable.offset();
}

TEST(Lifecycle, RecycledSegmentStaleContentsNeverReplay) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.recycle = true;
  cfg.spare_segments = 1;
  std::vector<std::string> survivors;
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value());
    // Life 1: fill three segments with thread-7 records.
    auto old = fill_until_segment(**log, 4, 7);
    const uint64_t first = old.front().segment();
    const auto first_path = dir.path() / seg::segment_file_name(first);
    struct stat st;
    ASSERT_EQ(::stat(first_path.c_str(), &st), 0);
    const ino_t recycled_inode = st.st_ino;
    ASSERT_TRUE((*log)->release_before(old.back()).has_value());
    EXPECT_FALSE(std::filesystem::exists(first_path));
    // Life 2: write until the log writes into that same file again under a
    // new id, then only a little into it.
    std::vector<Position> fresh;
    for (uint64_t i = 0;; ++i) {
      std::string rec = make_record(8, i, 1000);
      auto p = (*log)->append(rec);
      ASSERT_TRUE(p.has_value()) << p.error().describe();
      fresh.push_back(*p);
      survivors.push_back(rec);
      const auto path = dir.path() / seg::segment_file_name(p->segment());
      if (::stat(path.c_str(), &st) == 0 && st.st_ino == recycled_inode) break;
      ASSERT_LT(i, 10'000u) << "the released file never came back";
    }
    ASSERT_GE((*log)->stats().segments_recycled, 1u);
    ASSERT_TRUE((*log)->close().has_value());
    // The recycled file really holds old records past the new ones.
    std::ifstream f(dir.path() / seg::segment_file_name(fresh.back().segment()), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    size_t tail_nonzero = 0;
    for (size_t i = fresh.back().offset() + 2048; i < bytes.size(); ++i)
      tail_nonzero += bytes[i] != 0;
    // (tail=pad on direct segments leaves zero padding between records, so
    // less than half of life 1's bytes are non-zero there.)
    EXPECT_GT(tail_nonzero, 20'000u) << "the segment does not look recycled";
  }
  RecoveryReport report;
  auto replayed = replay_all(cfg, &report);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  // Only records appended after the release: thread-7 records from life 1
  // that were released must not come back, wherever they sit in the files.
  size_t seven = 0;
  for (const auto& r : *replayed) {
    uint32_t t;
    uint64_t seq;
    ASSERT_TRUE(check_record(r.data, &t, &seq));
    seven += t == 7;
  }
  ASSERT_GE(replayed->size(), survivors.size());
  std::vector<std::string> tail;
  for (size_t i = replayed->size() - survivors.size(); i < replayed->size(); ++i) {
    tail.push_back((*replayed)[i].data);
  }
  EXPECT_EQ(tail, survivors);
  // Thread-7 records from the one unreleased segment may remain; none beyond it.
  EXPECT_LT(seven, 300u);
  EXPECT_TRUE(report.damage.empty());
}

TEST(Lifecycle, SizeLimitBlocksThenErrorsThenResumesAfterRelease) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.recycle = false;
  cfg.max_total_size = 4 * cfg.segment_size;
  cfg.allocation_timeout = std::chrono::milliseconds(300);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value());
  std::vector<Position> acked;
  std::vector<std::string> records;
  Error error{Errc::io_error, ""};
  for (uint64_t i = 0;; ++i) {
    std::string rec = make_record(3, i, 2000);
    auto pos = (*log)->append(rec);
    if (!pos) {
      error = pos.error();
      break;
    }
    acked.push_back(*pos);
    records.push_back(rec);
    ASSERT_LT(i, 100'000u) << "the size limit never pushed back";
  }
  EXPECT_EQ(error.code, Errc::no_space) << error.describe();
  EXPECT_NE(error.message.find("max_total_size"), std::string::npos) << error.message;
  EXPECT_GE((*log)->stats().allocation_stalls, 1u);
  // Everything acknowledged is intact.
  auto recs = read_all(**log);
  ASSERT_EQ(recs.size(), records.size());
  for (size_t i = 0; i < recs.size(); ++i) ASSERT_EQ(recs[i].data, records[i]);

  // A blocked append completes once a release frees space.
  cfg.allocation_timeout = std::chrono::seconds(30);
  std::atomic<bool> done{false};
  Result<Position> blocked = make_error(Errc::io_error, "not run");
  std::thread t([&] {
    blocked = (*log)->append(make_record(4, 0, 2000));
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE((*log)->release_before(acked.back()).has_value());
  t.join();
  // The first attempt may still time out (300 ms); a retry must then work.
  if (!blocked) blocked = (*log)->append(make_record(4, 0, 2000));
  ASSERT_TRUE(blocked.has_value()) << blocked.error().describe();
  for (int i = 1; i < 100; ++i) {
    auto r = (*log)->append(make_record(4, i, 2000));
    ASSERT_TRUE(r.has_value()) << i << ": " << r.error().describe();
  }
  ASSERT_TRUE((*log)->close().has_value());
}

// Appenders queued behind one that waits for a segment each wait their own
// allocation_timeout, and each error says how long that append waited (it
// used to say "after waiting 0 ms" for those that took over the switch
// just before their deadline).
TEST(Lifecycle, NoSpaceErrorsNameTheWholeWait) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.recycle = false;
  cfg.max_total_size = 3 * cfg.segment_size;
  cfg.allocation_timeout = std::chrono::milliseconds(200);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  for (uint64_t i = 0;; ++i) {  // fill every segment the limit allows
    auto pos = (*log)->append(make_record(3, i, 2000));
    if (!pos) break;
    ASSERT_LT(i, 100'000u) << "the size limit never pushed back";
  }
  std::mutex mu;
  std::vector<std::pair<Error, std::chrono::milliseconds>> errors;
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < 5; ++i) {
        const auto start = std::chrono::steady_clock::now();
        auto pos = (*log)->append(make_record(10 + t, i, 2000));
        const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - start);
        if (pos) continue;
        std::lock_guard lock(mu);
        errors.emplace_back(pos.error(), took);
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(errors.size(), 20u);
  for (const auto& [e, took] : errors) {
    EXPECT_EQ(e.code, Errc::no_space) << e.describe();
    EXPECT_GE(took, cfg.allocation_timeout) << e.describe();
    const auto at = e.message.find("after waiting ");
    ASSERT_NE(at, std::string::npos) << e.describe();
    const long waited = std::strtol(e.message.c_str() + at + 14, nullptr, 10);
    EXPECT_GE(waited, cfg.allocation_timeout.count()) << e.describe();
    EXPECT_LE(waited, took.count()) << e.describe();
  }
  (void)(*log)->close();
}

}  // namespace
}  // namespace synclog::test
