// G6: bad input gets a clear error that names the problem, and nothing
// already durable is lost.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "segments/segment.h"
#include "test_util.h"

namespace synclog::test {
namespace {

void expect_error(const Result<std::unique_ptr<Log>>& r, Errc code, const std::string& part) {
  ASSERT_FALSE(r.has_value()) << "opened, expected: " << part;
  EXPECT_EQ(r.error().code, code) << r.error().describe();
  EXPECT_NE(r.error().message.find(part), std::string::npos) << r.error().describe();
}

// A log with a few durable records, closed; returns them.
std::vector<std::string> seed_log(const Config& cfg) {
  std::vector<std::string> recs;
  auto log = Log::open(cfg);
  EXPECT_TRUE(log.has_value());
  for (int i = 0; i < 100; ++i) {
    recs.push_back(make_record(1, i, 50));
    EXPECT_TRUE((*log)->append(recs.back()).has_value());
  }
  EXPECT_TRUE((*log)->close().has_value());
  return recs;
}

void expect_intact(const Config& cfg, const std::vector<std::string>& recs) {
  auto again = replay_all(cfg);
  ASSERT_TRUE(again.has_value()) << again.error().describe();
  ASSERT_EQ(again->size(), recs.size());
  for (size_t i = 0; i < recs.size(); ++i) EXPECT_EQ((*again)[i].data, recs[i]);
}

TEST(BadInput, EmptyAndOversizedRecords) {
  TempDir dir;
  auto log = Log::open(small_config(dir.path()));
  ASSERT_TRUE(log.has_value());
  // An empty record is a record (format version 4), not bad input.
  auto empty = (*log)->append(std::string_view());
  ASSERT_TRUE(empty.has_value()) << empty.error().describe();
  const size_t max = (*log)->config().max_record_size();
  auto big = (*log)->append(std::string(max + 1, 'x'));
  ASSERT_FALSE(big.has_value());
  EXPECT_EQ(big.error().code, Errc::invalid_argument);
  EXPECT_NE(big.error().message.find("exceeds the maximum of " + std::to_string(max)),
            std::string::npos)
      << big.error().message;
  // The largest record is fine, and the log is unharmed by the refusals.
  ASSERT_TRUE((*log)->append(std::string(max, 'y')).has_value());
  ASSERT_TRUE((*log)->append("after").has_value());
  auto recs = read_all(**log);
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0].position, *empty);
  EXPECT_TRUE(recs[0].data.empty());
  EXPECT_EQ(recs[1].data.size(), max);
}

TEST(BadInput, MissingDirectory) {
  TempDir dir;
  expect_error(Log::open(small_config(dir.path() / "nope")), Errc::bad_directory,
               "No such file or directory");
}

TEST(BadInput, DirectoryIsAFile) {
  TempDir dir;
  std::ofstream(dir.path() / "file") << "x";
  expect_error(Log::open(small_config(dir.path() / "file")), Errc::bad_directory,
               "is not a directory");
}

TEST(BadInput, UnwritableDirectory) {
  TempDir dir;
  const auto mnt = dir.path() / "ro";
  std::filesystem::create_directory(mnt);
  if (::mount("synclog-ro", mnt.c_str(), "tmpfs", MS_RDONLY, "size=1m") != 0) {
    GTEST_SKIP() << "cannot mount a read-only tmpfs here (needs root): " << std::strerror(errno);
  }
  auto r = Log::open(small_config(mnt));
  ::umount(mnt.c_str());
  expect_error(r, Errc::bad_directory, "not writable");
}

TEST(BadInput, ForeignFileIsNamedAndNothingIsLost) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  auto recs = seed_log(cfg);
  std::ofstream(dir.path() / "notes.txt") << "hello";
  expect_error(Log::open(cfg), Errc::bad_directory, "foreign file 'notes.txt'");
  std::filesystem::remove(dir.path() / "notes.txt");
  expect_intact(cfg, recs);
}

TEST(BadInput, SegmentWithBadHeaderIsNamed) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  auto recs = seed_log(cfg);
  const auto seg = dir.path() / seg::segment_file_name(1);
  std::string saved;
  {
    std::ifstream f(seg, std::ios::binary);
    saved.assign(std::istreambuf_iterator<char>(f), {});
  }
  {
    std::fstream f(seg, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(3);
    f.put('!');
  }
  expect_error(Log::open(cfg), Errc::bad_directory, seg.filename().string());
  expect_error(Log::open(cfg), Errc::bad_directory, "bad magic");
  std::ofstream(seg, std::ios::binary | std::ios::trunc) << saved;
  expect_intact(cfg, recs);
}

TEST(BadInput, SegmentCopiedUnderAnotherNameIsRefused) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  seed_log(cfg);
  std::filesystem::copy_file(dir.path() / seg::segment_file_name(1),
                             dir.path() / seg::segment_file_name(9));
  expect_error(Log::open(cfg), Errc::bad_directory, "header names segment 1");
}

TEST(BadInput, EmptyFileWithSegmentName) {
  TempDir dir;
  std::ofstream(dir.path() / seg::segment_file_name(3)) << "";
  expect_error(Log::open(small_config(dir.path())), Errc::bad_directory,
               "shorter than a segment header");
}

TEST(BadInput, InvalidConfigIsRefusedBeforeTouchingTheDirectory) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  cfg.segment_size = 1000;
  expect_error(Log::open(cfg), Errc::invalid_config, "segment_size");
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(BadInput, SecondOpenOfTheSameDirectoryIsRefused) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  auto first = Log::open(cfg);
  ASSERT_TRUE(first.has_value());
  expect_error(Log::open(cfg), Errc::bad_directory, "in use by another");
  ASSERT_TRUE((*first)->close().has_value());
  auto again = Log::open(cfg);
  EXPECT_TRUE(again.has_value());
}

TEST(BadInput, AppendAfterCloseIsAnError) {
  TempDir dir;
  auto log = Log::open(small_config(dir.path()));
  ASSERT_TRUE(log.has_value());
  ASSERT_TRUE((*log)->close().has_value());
  auto r = (*log)->append("late");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::closed);
}

}  // namespace
}  // namespace synclog::test
