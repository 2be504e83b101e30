// Archiving (docs/durability.md, Archiving): every complete, durable segment
// reaches the archive byte for byte, once; release waits for it; a failing
// archive is back-pressure, never loss; progress survives reopening.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "log/archiver.h"
#include "segments/segment.h"
#include "synclog/log.h"
#include "test_util.h"

namespace synclog::test {
namespace {

namespace fs = std::filesystem;

std::string expand_for_test(const std::string& command, const fs::path& path) {
  return expand_archive_command(command, path);
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A directory for the archive and its bookkeeping, next to the log's.
struct Archive {
  TempDir dir;
  fs::path files() const { return dir.path() / "segments"; }
  fs::path flag() const { return dir.path() / "succeed"; }
  fs::path calls() const { return dir.path() / "calls"; }
  Archive() { fs::create_directories(files()); }
  // Copies the segment, noting each call; fails unless flag() exists when
  // `gated`.
  std::string command(bool gated) const {
    return "echo %f >> " + calls().string() + " && " +
           (gated ? "test -e " + flag().string() + " && " : std::string()) + "cp %p " +
           files().string() + "/%f";
  }
  std::vector<std::string> call_lines() const {
    std::vector<std::string> out;
    std::ifstream in(calls());
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }
  std::set<uint64_t> archived_ids() const {
    std::set<uint64_t> ids;
    for (const auto& e : fs::directory_iterator(files())) {
      ids.insert(std::stoull(e.path().filename().string()));
    }
    return ids;
  }
};

std::vector<Replayed> append_records(Log& log, uint32_t thread, int n, size_t size = 8000) {
  std::vector<Replayed> out;
  for (int i = 0; i < n; ++i) {
    std::string rec = make_record(thread, static_cast<uint64_t>(i), size);
    auto pos = log.append(rec);
    EXPECT_TRUE(pos.has_value()) << pos.error().describe();
    if (!pos) break;
    out.push_back({*pos, rec});
  }
  return out;
}

TEST(Archive, EachCompleteSegmentReachesTheArchiveByteForByte) {
  TempDir dir;
  Archive archive;
  Config cfg = small_config(dir.path());
  cfg.archive_command = archive.command(false);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  const auto records = append_records(**log, 1, 150);  // about five segments
  const uint64_t last = (*log)->durable().segment();
  ASSERT_GE(last, 4u);
  ASSERT_TRUE(eventually([&] { return (*log)->stats().segments_archived == last - 1; }))
      << (*log)->stats().segments_archived << " of " << last - 1 << " archived; "
      << (*log)->stats().archive_error;
  EXPECT_EQ((*log)->stats().archive_pending, 0u);
  // The active segment is not complete: not archived.
  EXPECT_EQ(archive.archived_ids().size(), last - 1);
  EXPECT_EQ(archive.archived_ids().count(last), 0u);
  ASSERT_TRUE((*log)->close().has_value());

  // Closing completed the last segment; the next session archives it.
  log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  ASSERT_TRUE(eventually([&] { return archive.archived_ids().count(last) == 1; }));
  ASSERT_TRUE(eventually([&] { return (*log)->stats().archive_pending == 0; }));
  // Segments of earlier sessions are never written again: the log's files
  // now are what they were when archived.
  const Files files = load_segments(dir.path());
  for (uint64_t id = 1; id <= last; ++id) {
    ASSERT_EQ(files.count(id), 1u) << id;
    const std::string copy = read_file(archive.files() / seg::segment_file_name(id));
    EXPECT_EQ(copy.size(), files.at(id).size()) << id;
    EXPECT_TRUE(copy == files.at(id)) << "segment " << id << " differs from its archived copy";
  }
  ASSERT_TRUE((*log)->close().has_value());
}

// The built-in archive: the library copies each complete segment into
// archive_dir itself (temp name, fdatasync, rename, directory fsync), so a
// copy is durable before ARCHIVED counts it. Copies are byte for byte and
// no temp file stays; it is one of three archive settings at most.
TEST(Archive, ArchiveDirGetsDurableByteForByteCopies) {
  TempDir dir;
  Archive archive;
  Config cfg = small_config(dir.path());
  cfg.archive_dir = archive.files();
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  append_records(**log, 1, 150);
  const uint64_t last = (*log)->durable().segment();
  ASSERT_GE(last, 4u);
  ASSERT_TRUE(eventually([&] { return (*log)->stats().segments_archived == last - 1; }))
      << (*log)->stats().archive_error;
  ASSERT_TRUE((*log)->close().has_value());
  log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  ASSERT_TRUE(eventually([&] { return (*log)->stats().archive_pending == 0; }));
  ASSERT_TRUE((*log)->close().has_value());
  const Files files = load_segments(dir.path());
  for (uint64_t id = 1; id <= last; ++id) {
    ASSERT_EQ(files.count(id), 1u) << id;
    EXPECT_TRUE(read_file(archive.files() / seg::segment_file_name(id)) == files.at(id))
        << "segment " << id << " differs from its archived copy";
  }
  for (const auto& e : fs::directory_iterator(archive.files())) {
    uint64_t id = 0;
    EXPECT_TRUE(seg::parse_segment_file_name(e.path().filename().string(), &id))
        << "left behind: " << e.path();
  }
  EXPECT_EQ((fs::status(archive.files() / seg::segment_file_name(1)).permissions() &
             fs::perms::group_read),
            fs::perms::none);
  auto parsed = Config::parse("archive_dir=" + archive.files().string());
  ASSERT_TRUE(parsed.has_value()) << parsed.error().describe();
  EXPECT_EQ(parsed->archive_dir, archive.files());
  Config both = cfg;
  both.archive_command = "true";
  auto bad = Log::open(both);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("archive_dir"), std::string::npos) << bad.error().message;
}

TEST(Archive, HookGetsEachSegmentOnceInIdOrder) {
  TempDir dir;
  Config cfg = small_config(dir.path());
  std::mutex mu;
  std::vector<uint64_t> calls;
  bool fail_next = true;
  cfg.archive = [&](const fs::path& path, uint64_t id) -> Result<void> {
    std::lock_guard lock(mu);
    EXPECT_EQ(path, dir.path() / seg::segment_file_name(id));
    calls.push_back(id);
    if (fail_next) {
      fail_next = false;
      return make_error(Errc::io_error, "archive host unreachable");
    }
    return {};
  };
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  append_records(**log, 2, 150);
  const uint64_t last = (*log)->durable().segment();
  ASSERT_TRUE(eventually([&] { return (*log)->stats().segments_archived == last - 1; }));
  const Stats s = (*log)->stats();
  EXPECT_EQ(s.archive_failures, 1u);
  EXPECT_TRUE(s.archive_error.empty()) << s.archive_error;
  ASSERT_TRUE((*log)->close().has_value());
  std::lock_guard lock(mu);
  // The failed first attempt is retried; then each segment once, in order.
  std::vector<uint64_t> want{1};
  for (uint64_t id = 1; id < last; ++id) want.push_back(id);
  EXPECT_EQ(calls, want);
}

TEST(Archive, FailingArchiveHoldsReleaseAndLosesNothing) {
  TempDir dir;
  Archive archive;
  Config cfg = small_config(dir.path());
  cfg.archive_command = archive.command(true);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  auto records = append_records(**log, 3, 150);
  ASSERT_TRUE(eventually([&] { return (*log)->stats().archive_failures >= 2; }));
  Stats s = (*log)->stats();
  EXPECT_EQ(s.segments_archived, 0u);
  EXPECT_GE(s.archive_pending, 3u);
  EXPECT_NE(s.archive_error.find("exit status 1"), std::string::npos) << s.archive_error;
  EXPECT_NE(to_json(s).find("\"archive_failures\":"), std::string::npos);
  auto prom = to_prometheus(s);
  ASSERT_TRUE(prom.has_value());
  EXPECT_NE(prom->find("synclog_archive_failures_total "), std::string::npos);
  EXPECT_NE(prom->find("synclog_archive_pending_segments "), std::string::npos);

  const Position durable = (*log)->durable();
  auto released = (*log)->release_before(durable);
  ASSERT_TRUE(released.has_value()) << released.error().describe();
  EXPECT_TRUE(released->ids.empty());
  std::vector<uint64_t> held;
  for (uint64_t id = 1; id < durable.segment(); ++id) held.push_back(id);
  EXPECT_EQ(released->unarchived, held);
  EXPECT_EQ((*log)->stats().segments_released, 0u);
  ASSERT_TRUE((*log)->close().has_value());

  // Nothing was lost, and the next session still holds them back.
  auto replayed = replay_all(cfg);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  EXPECT_TRUE(same_records(*replayed, records));
  log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  ASSERT_TRUE(eventually([&] { return (*log)->stats().archive_failures >= 1; }));
  released = (*log)->release_before((*log)->durable());
  ASSERT_TRUE(released.has_value()) << released.error().describe();
  EXPECT_TRUE(released->ids.empty());
  EXPECT_FALSE(released->unarchived.empty());

  // Once the archive works again, they are archived and released.
  std::ofstream(archive.flag()).put('1');
  ASSERT_TRUE(eventually([&] { return (*log)->stats().archive_pending == 0; }))
      << (*log)->stats().archive_error;
  const uint64_t last = (*log)->durable().segment();
  released = (*log)->release_before((*log)->durable());
  ASSERT_TRUE(released.has_value()) << released.error().describe();
  EXPECT_TRUE(released->unarchived.empty());
  std::vector<uint64_t> all;
  for (uint64_t id = 1; id < last; ++id) all.push_back(id);
  EXPECT_EQ(released->ids, all);
  for (uint64_t id : all) EXPECT_EQ(archive.archived_ids().count(id), 1u) << id;
  ASSERT_TRUE((*log)->close().has_value());
}

TEST(Archive, FailingArchiveIsBackPressureThenResumes) {
  TempDir dir;
  Archive archive;
  Config cfg = small_config(dir.path());
  cfg.archive_command = archive.command(true);
  cfg.max_total_size = 4 * cfg.segment_size;
  cfg.allocation_timeout = std::chrono::milliseconds(300);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  std::vector<Replayed> acked;
  Error error{Errc::io_error, ""};
  for (uint64_t i = 0;; ++i) {
    std::string rec = make_record(4, i, 4000);
    auto pos = (*log)->append(rec);
    if (!pos) {
      error = pos.error();
      break;
    }
    acked.push_back({*pos, rec});
    // An engine checkpointing as it goes: nothing unarchived may go.
    auto released = (*log)->release_before(*pos);
    ASSERT_TRUE(released.has_value()) << released.error().describe();
    ASSERT_TRUE(released->ids.empty());
    ASSERT_LT(i, 100'000u) << "archiving never pushed back";
  }
  EXPECT_EQ(error.code, Errc::no_space) << error.describe();

  std::ofstream(archive.flag()).put('1');
  ASSERT_TRUE(eventually([&] { return (*log)->stats().archive_pending == 0; }))
      << (*log)->stats().archive_error;
  auto released = (*log)->release_before((*log)->durable());
  ASSERT_TRUE(released.has_value()) << released.error().describe();
  EXPECT_FALSE(released->ids.empty());
  // Space came back: appends go on. Archiving now runs behind them, so an
  // append may still time out until the next release lets an archived
  // segment go; none is refused for long.
  for (uint64_t i = 0; i < 300; ++i) {
    std::string rec = make_record(5, i, 4000);
    auto pos = (*log)->append(rec);
    for (int retry = 0; !pos && pos.error().code == Errc::no_space && retry < 20; ++retry) {
      auto r = (*log)->release_before((*log)->durable());
      ASSERT_TRUE(r.has_value()) << r.error().describe();
      pos = (*log)->append(rec);
    }
    ASSERT_TRUE(pos.has_value()) << i << ": " << pos.error().describe();
    acked.push_back({*pos, rec});
    auto r = (*log)->release_before(*pos);
    ASSERT_TRUE(r.has_value()) << r.error().describe();
  }
  EXPECT_GT((*log)->stats().segments_archived, 4u);
  ASSERT_TRUE((*log)->close().has_value());
  // What was not released is intact: the acknowledged records from the
  // oldest kept one on.
  auto replayed = replay_all(cfg);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  ASSERT_FALSE(replayed->empty());
  auto first = std::find_if(acked.begin(), acked.end(), [&](const Replayed& r) {
    return r.position == replayed->front().position;
  });
  ASSERT_NE(first, acked.end());
  EXPECT_TRUE(same_records(*replayed, std::vector<Replayed>(first, acked.end())));
}

TEST(Archive, CloseStopsARetryingArchiver) {
  TempDir dir;
  TempDir calls_dir;
  const auto calls = calls_dir.path() / "calls";
  Config cfg = small_config(dir.path());
  // Fails every time, leaving a line per attempt.
  cfg.archive_command = "echo %f >> '" + calls.string() + "'; false";
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  append_records(**log, 10, 60);
  ASSERT_TRUE(eventually([&] { return (*log)->stats().archive_failures >= 3; }));
  ASSERT_TRUE((*log)->close().has_value());
  // No attempt after close(): the thread is gone, not merely waiting.
  auto count = [&] {
    std::ifstream in(calls);
    return std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n');
  };
  const auto after_close = count();
  EXPECT_GE(after_close, 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // past the next backoff
  EXPECT_EQ(count(), after_close);
}

TEST(Archive, NoSegmentIsArchivedTwiceAcrossSessions) {
  TempDir dir;
  Archive archive;
  Config cfg = small_config(dir.path());
  cfg.archive_command = archive.command(false);
  uint64_t last = 0;
  for (uint32_t session = 0; session < 3; ++session) {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    append_records(**log, 6 + session, 80);
    last = (*log)->durable().segment();
    ASSERT_TRUE(eventually([&] { return (*log)->stats().archive_pending == 0; }));
    ASSERT_TRUE((*log)->close().has_value());
  }
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  ASSERT_TRUE(eventually([&] { return archive.archived_ids().count(last) == 1; }));
  ASSERT_TRUE((*log)->close().has_value());
  std::multiset<std::string> calls;
  for (const auto& line : archive.call_lines()) calls.insert(line);
  EXPECT_EQ(calls.size(), last);
  for (uint64_t id = 1; id <= last; ++id) {
    EXPECT_EQ(calls.count(seg::segment_file_name(id)), 1u) << id;
  }
}

TEST(Archive, StateFileIsNotForeignAndBadOneIsNamed) {
  TempDir dir;
  Archive archive;
  Config cfg = small_config(dir.path());
  cfg.archive_command = archive.command(false);
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    append_records(**log, 9, 60);
    ASSERT_TRUE(eventually([&] { return (*log)->stats().segments_archived >= 1; }));
    ASSERT_TRUE((*log)->close().has_value());
  }
  ASSERT_TRUE(fs::exists(dir.path() / seg::kArchiveStateName));
  // Without archiving the log opens and recovery ignores the state file.
  Config plain = small_config(dir.path());
  auto replayed = replay_all(plain);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  EXPECT_EQ(replayed->size(), 60u);
  std::ofstream(dir.path() / seg::kArchiveStateName, std::ios::trunc) << "through everything\n";
  auto log = Log::open(cfg);
  ASSERT_FALSE(log.has_value());
  EXPECT_EQ(log.error().code, Errc::bad_directory);
  EXPECT_NE(log.error().message.find("ARCHIVED"), std::string::npos) << log.error().message;
}

TEST(Archive, ConfigErrorsNameTheKey) {
  auto c = Config::parse("dir=/d,archive_command=cp %p /archive/%f.%%");
  ASSERT_TRUE(c.has_value()) << c.error().describe();
  EXPECT_EQ(c->archive_command, "cp %p /archive/%f.%%");
  EXPECT_TRUE(c->validate().has_value());
  auto again = Config::parse(c->to_string());
  ASSERT_TRUE(again.has_value()) << again.error().describe();
  EXPECT_EQ(again->archive_command, c->archive_command);
  Config plain;
  plain.dir = "/d";
  auto plain_again = Config::parse(plain.to_string());
  ASSERT_TRUE(plain_again.has_value()) << plain_again.error().describe();
  EXPECT_EQ(plain_again->archive_command, "");
  auto toml = Config::parse_toml("dir = \"/d\"\narchive_command = \"cp %p /a/%f\"\n");
  ASSERT_TRUE(toml.has_value()) << toml.error().describe();
  EXPECT_EQ(toml->archive_command, "cp %p /a/%f");
  EXPECT_EQ(expand_for_test("x %p %f %%", "/l/00000000000000000007.seg"),
            "x /l/00000000000000000007.seg 00000000000000000007.seg %");

  for (const char* bad : {"cp %s /a", "cp %p /a/%", "cp %P /a"}) {
    Config b;
    b.dir = "/d";
    b.archive_command = bad;
    auto r = b.validate();
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().code, Errc::invalid_config);
    EXPECT_NE(r.error().message.find("archive_command"), std::string::npos) << r.error().message;
  }
  TempDir dir;
  Config both = small_config(dir.path());
  both.archive_command = "true";
  both.archive = [](const fs::path&, uint64_t) -> Result<void> { return {}; };
  auto log = Log::open(both);
  ASSERT_FALSE(log.has_value());
  EXPECT_EQ(log.error().code, Errc::invalid_config);
  EXPECT_NE(log.error().message.find("archive_command"), std::string::npos);
  EXPECT_NE(log.error().message.find("archive hook"), std::string::npos);
}

}  // namespace
}  // namespace synclog::test
