// Change data capture (docs/operations.md, Change data capture): every
// segment is hard-linked into cdc_dir before it becomes active, its index
// never claims more than durable(), finished segments are marked, a
// consumer in another process (synclog-dump follow) prints exactly the
// acknowledged records, a full cdc_dir is back-pressure that lifts when the
// consumer deletes, and recycling never rewrites a file still linked there.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "io/hook.h"
#include "segments/cdc_index.h"
#include "segments/format.h"
#include "segments/segment.h"
#include "synclog/log.h"
#include "test_util.h"

namespace synclog::test {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A log directory and, beside it on the same filesystem, its cdc_dir.
struct Dirs {
  TempDir base;
  fs::path log() const { return base.path() / "log"; }
  fs::path cdc() const { return base.path() / "cdc"; }
  Dirs() {
    fs::create_directories(log());
    fs::create_directories(cdc());
  }
  Config config() const {
    Config c = small_config(log());
    c.cdc_dir = cdc();
    return c;
  }
  // Segment ids linked in cdc_dir, ascending.
  std::vector<uint64_t> linked() const {
    std::vector<uint64_t> ids;
    for (const auto& e : fs::directory_iterator(cdc())) {
      uint64_t id = 0;
      if (seg::parse_segment_file_name(e.path().filename().string(), &id)) ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end());
    return ids;
  }
  std::optional<seg::CdcIndex> index(uint64_t id) const {
    auto r = seg::load_cdc_index(cdc(), id);
    EXPECT_TRUE(r.has_value()) << r.error().describe();
    return r ? *r : std::nullopt;
  }
  // The consumer's part: what it deletes once it has read a segment.
  void consume(uint64_t id) const {
    fs::remove(cdc() / seg::segment_file_name(id));
    fs::remove(cdc() / seg::cdc_index_name(id));
  }
};

std::vector<Replayed> append_records(Log& log, int n, size_t size = 8000, uint64_t first = 0) {
  std::vector<Replayed> out;
  for (int i = 0; i < n; ++i) {
    std::string rec = make_record(1, first + static_cast<uint64_t>(i), size);
    auto pos = log.append(rec);
    EXPECT_TRUE(pos.has_value()) << pos.error().describe();
    if (!pos) break;
    out.push_back({*pos, rec});
  }
  return out;
}

struct Output {
  int rc = -1;
  std::string out, err;
};

// Runs `synclog-dump follow` with `args` in a child process; `running`, if
// given, is called with its pid and its stdout file while it runs.
Output follow(const std::vector<std::string>& args,
              const std::function<void(pid_t, const fs::path&)>& running = nullptr) {
  static TempDir scratch;
  const fs::path out = scratch.path() / "out", err = scratch.path() / "err";
  // Not the last run's output: `running` may poll the file before the
  // child truncates it.
  fs::remove(out);
  fs::remove(err);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    std::vector<char*> argv{const_cast<char*>(SYNCLOG_DUMP_BIN), const_cast<char*>("follow")};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(SYNCLOG_DUMP_BIN, argv.data());
    ::_exit(127);
  }
  if (running) running(pid, out);
  int status = 0;
  ::waitpid(pid, &status, 0);
  Output r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// The records of follow --json output.
std::vector<Replayed> parse_follow(const std::string& out) {
  std::vector<Replayed> got;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    std::string bytes;
    const std::string hex = j["payload_hex"];
    for (size_t i = 0; i + 1 < hex.size(); i += 2) {
      bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    got.push_back({Position(j["segment"], j["offset"]), bytes});
  }
  return got;
}

ino_t inode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_ino;
}

TEST(Cdc, EverySegmentIsLinkedAndIdentical) {
  Dirs d;
  auto log = Log::open(d.config());
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  append_records(**log, 150);  // about five segments
  const uint64_t last = (*log)->durable().segment();
  ASSERT_GE(last, 4u);
  // The active segment and the spare ahead are linked already.
  // The spare is linked before the manager offers it.
  ASSERT_TRUE(eventually([&] { return (*log)->stats().spare_files > 0; }));
  EXPECT_GE(d.linked().back(), last + 1) << "the spare ready ahead is not linked";
  EXPECT_GE((*log)->stats().cdc_segments_linked, last + 1);
  EXPECT_GT((*log)->stats().cdc_bytes, 0u);
  ASSERT_TRUE((*log)->close().has_value());
  // Closing deleted the spares, and with them their links: what is linked
  // is the log, file for file, the same inode.
  const Files files = load_segments(d.log());
  ASSERT_EQ(d.linked().size(), files.size());
  for (const auto& [id, bytes] : files) {
    const fs::path link = d.cdc() / seg::segment_file_name(id);
    ASSERT_TRUE(fs::exists(link)) << id;
    EXPECT_EQ(inode_of(link), inode_of(d.log() / seg::segment_file_name(id))) << id;
    EXPECT_TRUE(slurp(link) == bytes) << id;
    auto idx = d.index(id);
    ASSERT_TRUE(idx.has_value()) << id;
    EXPECT_TRUE(idx->completed) << "segment " << id << " is finished but its index says not";
  }
}

// Batch mode: after each acknowledged append (each followed by a sync), no
// index claims more than durable(): the segment holding it at most its
// offset, later ones nothing, and only earlier ones are complete.
TEST(Cdc, IndexIsNeverAheadOfDurable) {
  Dirs d;
  auto log = Log::open(d.config());
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  for (int i = 0; i < 120; ++i) {
    auto pos = (*log)->append(make_record(1, static_cast<uint64_t>(i), 6000));
    ASSERT_TRUE(pos.has_value()) << pos.error().describe();
    if (i % 8 == 0) {
      // Let the index catch up now and then, so that the checks below also
      // see an index written for the latest sync. It must land exactly on
      // durable(), never past it.
      const Position now = (*log)->durable();
      ASSERT_TRUE(eventually([&] {
        auto idx = d.index(now.segment());
        return idx && (idx->completed || idx->offset >= now.offset());
      }));
      auto idx = d.index(now.segment());
      ASSERT_TRUE(idx.has_value());
      ASSERT_EQ(idx->offset, now.offset()) << "segment " << now.segment();
    }
    for (uint64_t id : d.linked()) {
      auto idx = d.index(id);
      // Read after the index: durable() only grows.
      const Position durable = (*log)->durable();
      ASSERT_TRUE(idx.has_value()) << "segment " << id << " linked without an index";
      if (id < durable.segment()) continue;  // complete, or about to be marked
      ASSERT_FALSE(idx->completed)
          << "segment " << id << " marked complete while durable() is " << durable.to_string();
      if (id == durable.segment()) {
        ASSERT_LE(idx->offset, durable.offset())
            << "index of segment " << id << " is ahead of durable() " << durable.to_string();
      } else {
        ASSERT_EQ(idx->offset, seg::kHeaderSize)
            << "segment " << id << " is past durable() " << durable.to_string();
      }
    }
  }
  // The index follows durable(): it gets there.
  const Position durable = (*log)->durable();
  ASSERT_TRUE(eventually([&] {
    auto idx = d.index(durable.segment());
    return idx && idx->offset == durable.offset();
  }));
  ASSERT_TRUE((*log)->close().has_value());
}

TEST(Cdc, FinishedSegmentsAreMarkedCompleteAndReopenMarksTheRest) {
  Dirs d;
  auto log = Log::open(d.config());
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  append_records(**log, 120);
  const Position durable = (*log)->durable();
  ASSERT_GE(durable.segment(), 3u);
  ASSERT_TRUE(eventually([&] {
    for (uint64_t id = 1; id < durable.segment(); ++id) {
      auto idx = d.index(id);
      if (!idx || !idx->completed || idx->offset != d.config().segment_size) return false;
    }
    return true;
  }));
  auto active = d.index(durable.segment());
  ASSERT_TRUE(active.has_value());
  EXPECT_FALSE(active->completed);
  ASSERT_TRUE((*log)->close().has_value());
  auto closed = d.index(durable.segment());
  ASSERT_TRUE(closed.has_value());
  EXPECT_TRUE(closed->completed) << "close sealed the last segment";

  // As after a crash before the mark: the next open marks it, at the end
  // recovery found.
  ASSERT_TRUE(seg::store_cdc_index(d.cdc(), durable.segment(), {seg::kHeaderSize, false}, 0600)
                  .has_value());
  log = Log::open(d.config());
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  auto reopened = d.index(durable.segment());
  ASSERT_TRUE(reopened.has_value());
  EXPECT_TRUE(reopened->completed);
  EXPECT_GE(reopened->offset, durable.offset());
  ASSERT_TRUE((*log)->close().has_value());
}

// The consumer in another process prints every acknowledged record, once,
// in log order, and deletes what it consumed.
TEST(Cdc, ConsumerInAnotherProcessPrintsExactlyTheAcknowledgedRecords) {
  Dirs d;
  auto log = Log::open(d.config());
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  std::vector<Replayed> acked;
  Output out;
  std::thread consumer([&] {
    out = follow({d.cdc().string(), "--json", "--delete", "--until-idle", "3s"});
  });
  for (int round = 0; round < 4; ++round) {
    auto more = append_records(**log, 40, 1000 + 1500 * round, acked.size());
    acked.insert(acked.end(), more.begin(), more.end());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // A batch: its records come out one by one, at their own positions.
  std::vector<std::string> batch{"batch-a", "batch-b", "batch-c"};
  std::vector<std::string_view> views(batch.begin(), batch.end());
  auto positions = (*log)->append_batch(views);
  ASSERT_TRUE(positions.has_value()) << positions.error().describe();
  for (size_t i = 0; i < batch.size(); ++i) acked.push_back({(*positions)[i], batch[i]});
  ASSERT_TRUE((*log)->close().has_value());
  consumer.join();
  ASSERT_EQ(out.rc, 0) << out.err;
  EXPECT_TRUE(same_records(parse_follow(out.out), acked)) << out.err;
  // Every segment was complete and consumed: nothing is left.
  EXPECT_TRUE(d.linked().empty());
}

// Compressed and encrypted records: with the key file the consumer prints
// every record at its own position, the records of a compressed ("packed")
// batch included; without it, each stored record is reported as encrypted
// and no ciphertext is printed as if it were a record.
TEST(Cdc, ConsumerOfAnEncryptedCompressedLog) {
  Dirs d;
  const fs::path key_file = d.base.path() / "keys";
  std::ofstream(key_file) << "7 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n";
  fs::permissions(key_file, fs::perms::owner_read | fs::perms::owner_write);
  Config c = d.config();
  c.compression = Compression::lz4;
  c.encryption = Encryption::aes_256_gcm;
  c.encryption_key_file = key_file;
  std::vector<Replayed> acked;
  size_t frames = 0;
  {
    auto log = Log::open(c);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    for (int round = 0; round < 3; ++round) {
      std::vector<std::string> batch;
      for (int i = 0; i < 20; ++i) {
        batch.push_back("batch " + std::to_string(round) + "/" + std::to_string(i) + " " +
                        std::string(300, 'a' + static_cast<char>(i % 3)));
      }
      std::vector<std::string_view> views(batch.begin(), batch.end());
      auto positions = (*log)->append_batch(views);
      ASSERT_TRUE(positions.has_value()) << positions.error().describe();
      for (size_t i = 0; i < batch.size(); ++i) acked.push_back({(*positions)[i], batch[i]});
      ++frames;
      const std::string single = "single " + std::to_string(round) + std::string(500, 'z');
      auto pos = (*log)->append(single);
      ASSERT_TRUE(pos.has_value()) << pos.error().describe();
      acked.push_back({*pos, single});
      ++frames;
    }
    ASSERT_GT((*log)->stats().stored_bytes, 0u);
    ASSERT_LT((*log)->stats().stored_bytes, (*log)->stats().bytes) << "nothing was compressed";
    ASSERT_TRUE((*log)->close().has_value());
  }
  const Output sealed = follow({d.cdc().string(), "--json", "--until-idle", "300ms"});
  ASSERT_EQ(sealed.rc, 0) << sealed.err;
  size_t lines = 0;
  std::istringstream in(sealed.out);
  for (std::string line; std::getline(in, line); ++lines) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_TRUE(j.value("encrypted_without_key", false)) << line;
    EXPECT_FALSE(j.contains("payload_hex")) << line;
  }
  EXPECT_EQ(lines, frames);
  const Output out = follow(
      {d.cdc().string(), "--json", "--key-file", key_file.string(), "--until-idle", "300ms"});
  ASSERT_EQ(out.rc, 0) << out.err;
  EXPECT_TRUE(same_records(parse_follow(out.out), acked)) << out.out;
}

// Periodic mode with a sync that never comes on its own: the records written
// after the last sync are in the file (for mmap, in the shared mapping)
// but not durable, and the consumer must not print them.
TEST(Cdc, ConsumerNeverPrintsPastTheDurableOffset) {
  Dirs d;
  Config c = d.config();
  c.mode = SyncMode::periodic;
  c.interval = std::chrono::seconds(600);
  auto log = Log::open(c);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  auto synced = append_records(**log, 10, 500);
  ASSERT_TRUE((*log)->sync().has_value());
  const Position durable = (*log)->durable();
  append_records(**log, 10, 500, 10);  // written, never synced
  ASSERT_TRUE(eventually([&] {
    auto idx = d.index(durable.segment());
    return idx && idx->offset == durable.offset();
  }));
  const Output out = follow({d.cdc().string(), "--json", "--until-idle", "300ms"});
  ASSERT_EQ(out.rc, 0) << out.err;
  EXPECT_TRUE(same_records(parse_follow(out.out), synced));
  ASSERT_TRUE((*log)->close().has_value());
}

// A child process appends `n` records of 7000 bytes, lets the spare ahead
// be made and linked, then dies without closing.
void crash_after_appends(const Dirs& d, int n) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    auto log = Log::open(d.config());
    if (!log) ::_exit(2);
    for (int i = 0; i < n; ++i) {
      if (!(*log)->append(make_record(1, static_cast<uint64_t>(i), 7000))) ::_exit(3);
    }
    while ((*log)->stats().spare_files == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// A process crash (no close): the next open marks the crashed session's
// segments complete at the end recovery found and removes the links of its
// spares; the consumer then prints exactly what replay returns.
TEST(Cdc, OpenAfterACrashCompletesIndexesAndDropsSpareLinks) {
  Dirs d;
  constexpr int kRecords = 100;
  ASSERT_NO_FATAL_FAILURE(crash_after_appends(d, kRecords));
  const auto before = d.linked();
  ASSERT_GE(before.size(), 3u);

  std::vector<Replayed> replayed;
  {
    auto log = Log::open(d.config());
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    replayed = read_all(**log);
    ASSERT_EQ(replayed.size(), static_cast<size_t>(kRecords));
    const Files files = load_segments(d.log());
    ASSERT_FALSE(files.contains(before.back())) << "the crashed session's spare was kept";
    // Every earlier segment still in the log is linked and complete; the
    // crashed session's spare lies past the log and is gone.
    for (uint64_t id : before) {
      if (!files.contains(id)) {
        EXPECT_FALSE(fs::exists(d.cdc() / seg::segment_file_name(id)))
            << "link of segment " << id << " (not in the log) was kept";
        continue;
      }
      auto idx = d.index(id);
      ASSERT_TRUE(idx.has_value()) << id;
      EXPECT_TRUE(idx->completed) << id;
    }
    ASSERT_TRUE((*log)->close().has_value());
  }
  const Output out = follow({d.cdc().string(), "--json", "--delete", "--until-idle", "300ms"});
  ASSERT_EQ(out.rc, 0) << out.err;
  EXPECT_TRUE(same_records(parse_follow(out.out), replayed)) << out.err;
  EXPECT_TRUE(d.linked().empty());
}

// Fails the n-th fsync of one directory with EIO (n counted from arm()).
class FailDirSync : public io::Hook {
 public:
  FailDirSync(fs::path dir, int n) : dir_(std::move(dir)), n_(n) {}
  void arm() { armed_.store(true); }
  int before(const io::Event& e) override {
    if (!armed_.load() || e.op != io::Op::dir_sync || e.path != dir_) return 0;
    return ++count_ == n_ ? EIO : 0;
  }
  bool fired() const { return count_.load() >= n_; }

 private:
  const fs::path dir_;
  const int n_;
  std::atomic<bool> armed_{false};
  std::atomic<int> count_{0};
};

// A failed fsync of cdc_dir after a spare's link was made stops the log
// like any failed step of making a segment (the filesystem may be dying):
// the appends after it get Errc::failed naming the directory fsync, the
// next session goes on, and the consumer prints every record that was
// acknowledged in either session, in order, and nothing else.
TEST(Cdc, FailedCdcDirSyncStopsTheLogAndTheNextOpenGoesOn) {
  Dirs d;
  std::vector<Replayed> appended, synced;
  {
    FailDirSync hook(d.cdc(), 1);
    HookGuard guard(&hook);
    auto log = Log::open(d.config());
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    hook.arm();
    std::optional<Error> stop;
    for (uint64_t i = 0; i < 150 && !stop; ++i) {  // about five segments
      std::string rec = make_record(1, i, 8000);
      auto pos = (*log)->append(rec);
      if (!pos) {
        stop = pos.error();
        break;
      }
      appended.push_back({*pos, rec});
      if (auto s = (*log)->sync(); !s) {
        stop = s.error();
      } else {
        synced = appended;
      }
    }
    ASSERT_TRUE(hook.fired());
    ASSERT_TRUE(stop.has_value()) << "appends went on after a failed fsync of cdc_dir";
    EXPECT_EQ(stop->code, Errc::failed) << stop->describe();
    EXPECT_NE(stop->describe().find("fsync directory"), std::string::npos) << stop->describe();
    EXPECT_NE(stop->describe().find(std::strerror(EIO)), std::string::npos) << stop->describe();
    EXPECT_FALSE((*log)->append("after the stop").has_value());
    EXPECT_FALSE((*log)->close().has_value()) << "close() succeeded on a stopped log";
  }
  std::vector<Replayed> acked = synced;
  {
    auto log = Log::open(d.config());
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    auto more = append_records(**log, 150, 8000, 1000);
    ASSERT_EQ(more.size(), 150u);
    ASSERT_TRUE((*log)->close().has_value());
    acked.insert(acked.end(), more.begin(), more.end());
  }
  const Output out = follow({d.cdc().string(), "--json", "--delete", "--until-idle", "300ms"});
  ASSERT_EQ(out.rc, 0) << out.err;
  // Records appended but not yet synced at the stop may or may not have
  // become durable: the consumer may print them, between the two sessions.
  std::vector<Replayed> got = parse_follow(out.out);
  std::vector<Replayed> tail(appended.begin() + static_cast<std::ptrdiff_t>(synced.size()),
                             appended.end());
  bool ok = false;
  for (size_t k = 0; k <= tail.size() && !ok; ++k) {
    std::vector<Replayed> want = synced;
    want.insert(want.end(), tail.begin(), tail.begin() + static_cast<std::ptrdiff_t>(k));
    want.insert(want.end(), acked.begin() + static_cast<std::ptrdiff_t>(synced.size()),
                acked.end());
    ok = static_cast<bool>(same_records(got, want));
  }
  EXPECT_TRUE(ok) << "consumer printed " << got.size() << " records; " << synced.size()
                  << " synced and " << tail.size() << " unsynced in the stopped session, "
                  << (acked.size() - synced.size()) << " in the next\n"
                  << out.err;
  EXPECT_TRUE(d.linked().empty());
}

// After a crash inside a record in fragments only its first fragment is
// left: the log never returns it, and neither may the consumer print it
// (nor a piece of it). Whole fragmented records come out whole, once, at
// their position. The crash is reproduced on disk: the segments after the
// first fragment's are gone, as if never made durable.
TEST(Cdc, ConsumerPrintsFragmentedRecordsWholeAndNeverALoneFirstFragment) {
  Dirs d;
  Config c = d.config();
  c.max_record = 600u << 10;  // fragments across three or four segments
  std::vector<Replayed> acked;
  uint64_t cut = 0;  // the segment of the second record's first fragment
  {
    auto log = Log::open(c);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    acked = append_records(**log, 3, 1000);
    const std::string big = make_record(1, 100, 500u << 10);
    auto pos = (*log)->append(big);
    ASSERT_TRUE(pos.has_value()) << pos.error().describe();
    acked.push_back({*pos, big});
    auto more = append_records(**log, 2, 1000, 200);
    acked.insert(acked.end(), more.begin(), more.end());
    const std::string lost = make_record(1, 300, 500u << 10);
    auto lost_pos = (*log)->append(lost);
    ASSERT_TRUE(lost_pos.has_value()) << lost_pos.error().describe();
    cut = lost_pos->segment();
    ASSERT_TRUE((*log)->close().has_value());
  }
  // Whole: the consumer prints the fragmented record as one.
  Output out = follow({d.cdc().string(), "--json", "--until-idle", "300ms"});
  ASSERT_EQ(out.rc, 0) << out.err;
  std::vector<Replayed> all = acked;
  {
    auto log = Log::open(c);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    all = read_all(**log);
    ASSERT_TRUE((*log)->close().has_value());
  }
  ASSERT_EQ(all.size(), acked.size() + 1);
  EXPECT_TRUE(same_records(parse_follow(out.out), all)) << out.err;

  // The crash: only the last record's first fragment (in segment `cut`)
  // is left, and its index does not say complete yet.
  for (const auto& e : fs::directory_iterator(d.log())) {
    uint64_t id = 0;
    if (seg::parse_segment_file_name(e.path().filename().string(), &id) && id > cut) {
      fs::remove(e.path());
      d.consume(id);
    }
  }
  ASSERT_TRUE(seg::store_cdc_index(d.cdc(), cut, {seg::kHeaderSize, false}, 0600).has_value());
  {
    auto log = Log::open(c);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    ASSERT_TRUE(same_records(read_all(**log), acked));
    ASSERT_TRUE((*log)->close().has_value());
  }
  out = follow({d.cdc().string(), "--json", "--delete", "--until-idle", "300ms"});
  ASSERT_EQ(out.rc, 0) << out.err;
  EXPECT_TRUE(same_records(parse_follow(out.out), acked)) << out.out;
}

// Records the changes made in one directory, in order: "remove <name>",
// "rename <to-name>", "sync".
class DirChanges : public io::Hook {
 public:
  explicit DirChanges(fs::path dir) : dir_(std::move(dir)) {}
  void after(const io::Event& e) override {
    std::lock_guard lock(mu_);
    if (e.op == io::Op::dir_sync && e.path == dir_) {
      seen_.push_back("sync");
    } else if (e.op == io::Op::remove && e.path.parent_path() == dir_) {
      seen_.push_back("remove " + e.path.filename().string());
    } else if (e.op == io::Op::rename && e.to && e.to->parent_path() == dir_) {
      seen_.push_back("rename " + e.to->filename().string());
    }
  }
  std::vector<std::string> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  const fs::path dir_;
  std::mutex mu_;
  std::vector<std::string> seen_;
};

// A crash with a spare linked and inside an index rewrite (its temp file
// left): the next open succeeds, and removes the spare's link durably
// before it completes any index, so a consumer that moves on from a
// segment just completed never lands on a link about to disappear.
TEST(Cdc, OpenAfterACrashRemovesStaleLinksBeforeCompletingAnyIndex) {
  Dirs d;
  ASSERT_NO_FATAL_FAILURE(crash_after_appends(d, 100));
  const auto linked = d.linked();
  ASSERT_GE(linked.size(), 3u);
  const uint64_t spare = linked.back();
  // Every unfinished index was being rewritten.
  for (uint64_t id : linked) {
    auto idx = d.index(id);
    if (idx && !idx->completed) {
      std::ofstream(d.cdc() / (seg::cdc_index_name(id) + ".tmp")) << "1";
      // The link again, after the temp file: settling must not depend on
      // which of the two the directory lists first.
      const fs::path link = d.cdc() / seg::segment_file_name(id);
      fs::remove(link);
      fs::create_hard_link(d.log() / seg::segment_file_name(id), link);
    }
  }
  DirChanges changes(d.cdc());
  std::vector<std::string> seen;
  {
    HookGuard guard(&changes);
    auto log = Log::open(d.config());
    seen = changes.seen();
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    ASSERT_TRUE((*log)->close().has_value());
  }
  const auto at = [&](const std::string& what) {
    return std::find(seen.begin(), seen.end(), what) - seen.begin();
  };
  const auto removed = at("remove " + seg::segment_file_name(spare));
  ASSERT_LT(removed, static_cast<long>(seen.size())) << "the spare's link was not removed";
  long first_completed = static_cast<long>(seen.size());
  for (long i = 0; i < static_cast<long>(seen.size()); ++i) {
    if (seen[i].starts_with("rename ") && seen[i].ends_with("_cdc.idx")) {
      first_completed = i;
      break;
    }
  }
  ASSERT_LT(first_completed, static_cast<long>(seen.size())) << "no index was completed";
  const auto synced = std::find(seen.begin() + removed, seen.end(), "sync") - seen.begin();
  EXPECT_LT(synced, first_completed) << "an index was completed (" << seen[first_completed]
                                     << ") before the spare's link was durably removed";
  for (const auto& e : fs::directory_iterator(d.cdc())) {
    EXPECT_FALSE(e.path().filename().string().ends_with(".tmp")) << e.path();
  }
}

// A consumer whose current segment's link disappears (a stale spare link
// that the next open removed) lists the directory again and goes on with
// what is linked now.
TEST(Cdc, ConsumerMovesOnWhenItsSegmentDisappears) {
  Dirs d;
  // A stale link of a segment no session will make again, named nothing
  // durable.
  constexpr uint64_t kStale = 999;
  {
    std::ofstream(d.cdc() / seg::segment_file_name(kStale)) << std::string(4096, '\0');
    ASSERT_TRUE(seg::store_cdc_index(d.cdc(), kStale, {seg::kHeaderSize, false}, 0600));
  }
  std::vector<Replayed> acked;
  const Output out =
      follow({d.cdc().string(), "--json", "--until-idle", "1s"}, [&](pid_t, const fs::path&) {
        // Not synchronisation: only gives the consumer time to take the
        // stale segment as its cursor (the test cannot pass wrongly).
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        d.consume(kStale);
        auto log = Log::open(d.config());
        ASSERT_TRUE(log.has_value()) << log.error().describe();
        acked = append_records(**log, 10, 500);
        ASSERT_TRUE((*log)->close().has_value());
      });
  ASSERT_EQ(out.rc, 0) << out.err;
  EXPECT_TRUE(same_records(parse_follow(out.out), acked)) << out.err;
}

// cdc_dir full: appends wait allocation_timeout and fail with no_space
// naming CDC; nothing acknowledged is lost; once the consumer deletes,
// appends go on.
TEST(Cdc, FullCdcDirIsBackPressureUntilTheConsumerDeletes) {
  Dirs d;
  Config c = d.config();
  c.cdc_max_size = 4 * c.segment_size;  // three segments and their indexes
  c.allocation_timeout = std::chrono::milliseconds(300);
  auto log = Log::open(c);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  std::vector<Replayed> acked;
  std::optional<Error> refused;
  for (int i = 0; i < 400 && !refused; ++i) {
    std::string rec = make_record(1, static_cast<uint64_t>(i), 8000);
    auto pos = (*log)->append(rec);
    if (!pos) {
      refused = pos.error();
      break;
    }
    acked.push_back({*pos, rec});
  }
  ASSERT_TRUE(refused.has_value()) << "cdc_max_size never held appends back";
  EXPECT_EQ(refused->code, Errc::no_space) << refused->describe();
  EXPECT_NE(refused->message.find("change data capture"), std::string::npos) << refused->describe();
  EXPECT_GT((*log)->stats().cdc_blocked_appends, 0u) << to_json((*log)->stats());
  EXPECT_LE((*log)->stats().cdc_bytes, c.cdc_max_size);
  // Not fail-stop: what was acknowledged is all there.
  EXPECT_TRUE(same_records(read_all(**log), acked));

  // The consumer deletes the oldest (complete) segment: room again.
  const auto linked = d.linked();
  ASSERT_FALSE(linked.empty());
  d.consume(linked.front());
  auto more = append_records(**log, 20, 8000, 1000);  // less than the segment freed
  ASSERT_EQ(more.size(), 20u) << "appends did not resume after the consumer deleted a segment";
  acked.insert(acked.end(), more.begin(), more.end());
  EXPECT_TRUE(same_records(read_all(**log), acked));
  ASSERT_TRUE((*log)->close().has_value());
}

// Release with recycling: a file still linked in cdc_dir is deleted from the
// log, not recycled, so the consumer's copy never changes; once the
// consumer has deleted the link, the file may be recycled.
TEST(Cdc, RecyclingNeverOverwritesALinkedSegment) {
  Dirs d;
  Config c = d.config();
  c.recycle = true;
  auto log = Log::open(c);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  append_records(**log, 120);
  const Position durable = (*log)->durable();
  ASSERT_GE(durable.segment(), 3u);
  std::map<uint64_t, std::string> before;
  for (uint64_t id = 1; id < durable.segment(); ++id) {
    before[id] = slurp(d.cdc() / seg::segment_file_name(id));
  }
  auto released = (*log)->release_before(durable);
  ASSERT_TRUE(released.has_value()) << released.error().describe();
  EXPECT_EQ(released->ids.size(), before.size());
  EXPECT_EQ(released->recycled, 0u) << "a segment still linked in cdc_dir was recycled";
  append_records(**log, 120, 8000, 1000);  // takes new spares
  for (const auto& [id, bytes] : before) {
    EXPECT_TRUE(slurp(d.cdc() / seg::segment_file_name(id)) == bytes)
        << "segment " << id << " changed under the consumer";
  }

  // Consumed: now recycling may take the files.
  const Position later = (*log)->durable();
  for (uint64_t id : d.linked()) {
    if (id < later.segment()) d.consume(id);
  }
  released = (*log)->release_before(later);
  ASSERT_TRUE(released.has_value()) << released.error().describe();
  EXPECT_GT(released->recycled, 0u) << "consumed segments should be recycled";
  auto last = append_records(**log, 60, 8000, 2000);
  EXPECT_EQ(last.size(), 60u);
  EXPECT_GT((*log)->stats().segments_recycled, 0u);
  ASSERT_TRUE((*log)->close().has_value());
}

TEST(Cdc, ConfigErrorsNameTheKey) {
  Dirs d;
  auto expect_error = [](const Config& c, const std::string& says) {
    auto log = Log::open(c);
    ASSERT_FALSE(log.has_value()) << "opened with " << c.to_string();
    EXPECT_NE(log.error().message.find(says), std::string::npos) << log.error().describe();
  };
  Config c = d.config();
  c.cdc_dir.clear();
  c.cdc_max_size = 1 << 20;
  expect_error(c, "'cdc_max_size': set without cdc_dir");
  c = d.config();
  c.cdc_max_size = c.segment_size;
  expect_error(c, "'cdc_max_size'");
  c = d.config();
  c.cdc_dir = d.log();
  expect_error(c, "is the log directory");
  c.cdc_dir = d.log() / "sub";
  fs::create_directories(c.cdc_dir);
  expect_error(c, "or inside it");
  c.cdc_dir = d.base.path() / "missing";
  expect_error(c, "'cdc_dir'");
  // /dev/shm (tmpfs) and the build tree are two filesystems.
  TempDir disk(disk_base());
  c.cdc_dir = disk.path();
  expect_error(c, "not on the same filesystem");

  auto parsed = Config::parse("dir=/x,cdc_dir=/y,cdc_max_size=64MiB");
  ASSERT_TRUE(parsed.has_value()) << parsed.error().describe();
  EXPECT_EQ(parsed->cdc_dir, "/y");
  EXPECT_EQ(parsed->cdc_max_size, 64u << 20);
  auto again = Config::parse(parsed->to_string());
  ASSERT_TRUE(again.has_value()) << again.error().describe();
  EXPECT_EQ(again->cdc_dir, "/y");
  EXPECT_EQ(again->cdc_max_size, 64u << 20);
  auto toml = Config::parse_toml("dir = \"/x\"\ncdc_dir = \"/y\"\ncdc_max_size = \"1GiB\"\n");
  ASSERT_TRUE(toml.has_value()) << toml.error().describe();
  EXPECT_EQ(toml->cdc_max_size, 1u << 30);
  auto bad = Config::parse("cdc_max_size=lots");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("'cdc_max_size'"), std::string::npos);
}

TEST(Cdc, FollowRunsUntilSigint) {
  Dirs d;
  auto log = Log::open(d.config());
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  const auto acked = append_records(**log, 10, 500);
  const Output out =
      follow({d.cdc().string(), "--json"}, [&](pid_t pid, const fs::path& stdout_file) {
        // Once it has printed what is durable, stop it as an operator would.
        EXPECT_TRUE(eventually([&] {
          const std::string text = slurp(stdout_file);
          return std::count(text.begin(), text.end(), '\n') == static_cast<long>(acked.size());
        }));
        ::kill(pid, SIGINT);
      });
  EXPECT_EQ(out.rc, 0) << out.err;
  EXPECT_TRUE(same_records(parse_follow(out.out), acked)) << out.err;
  ASSERT_TRUE((*log)->close().has_value());
}

TEST(Cdc, FollowRefusesBadInputAndNamesDamage) {
  Dirs d;
  EXPECT_EQ(follow({d.cdc().string(), "--until-idle", "0s"}).rc, 2);
  EXPECT_EQ(follow({d.cdc().string(), "--until-idle", "soon"}).rc, 2);
  EXPECT_EQ(follow({(d.base.path() / "missing").string(), "--until-idle", "10ms"}).rc, 2);
  auto log = Log::open(d.config());
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  append_records(**log, 10, 500);
  ASSERT_TRUE((*log)->close().has_value());
  // An index that does not parse is named, not guessed at.
  std::ofstream(d.cdc() / seg::cdc_index_name(d.linked().front())) << "12x\n";
  Output out = follow({d.cdc().string(), "--until-idle", "100ms"});
  EXPECT_EQ(out.rc, 1) << out.err;
  EXPECT_NE(out.err.find("does not parse"), std::string::npos) << out.err;
  // A damaged record below the durable offset ends the walk, named.
  const uint64_t first = d.linked().front();
  ASSERT_TRUE(
      seg::store_cdc_index(d.cdc(), first, {d.config().segment_size, true}, 0600).has_value());
  {
    std::fstream f(d.cdc() / seg::segment_file_name(first),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(300);
    f.put('\x5a');
  }
  out = follow({d.cdc().string(), "--until-idle", "100ms"});
  EXPECT_EQ(out.rc, 1) << out.err;
  EXPECT_NE(out.err.find("no valid record below the durable offset"), std::string::npos) << out.err;
}

TEST(Cdc, StatsAndMetricsShowCdc) {
  Dirs d;
  auto log = Log::open(d.config());
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  append_records(**log, 40);
  const Stats s = (*log)->stats();
  EXPECT_GT(s.cdc_segments_linked, 0u);
  EXPECT_GT(s.cdc_bytes, 0u);
  const std::string j = to_json(s);
  for (const char* key :
       {"\"cdc_segments_linked\"", "\"cdc_bytes\"", "\"cdc_blocked_appends\"", "\"cdc_error\""}) {
    EXPECT_NE(j.find(key), std::string::npos) << key;
  }
  auto prom = to_prometheus(s);
  ASSERT_TRUE(prom.has_value());
  for (const char* name : {"synclog_cdc_segments_linked_total ", "synclog_cdc_bytes ",
                           "synclog_cdc_blocked_appends_total "}) {
    EXPECT_NE(prom->find(name), std::string::npos) << name;
  }
  ASSERT_TRUE((*log)->close().has_value());
}

}  // namespace
}  // namespace synclog::test
