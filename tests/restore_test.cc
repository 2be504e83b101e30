// Point-in-time restore (docs/durability.md, Restore): a log written with
// archiving, its live directory gone or kept, restored to the end, to a
// position and to a time; the restored log replays exactly the records the
// oracle says, at their positions, byte for byte. A broken chain or a
// damaged copy is an error, never a shorter log.
#include "synclog/restore.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "io/crc32c.h"
#include "segments/format.h"
#include "segments/segment.h"
#include "segments/segment_reader.h"
#include "synclog/log.h"
#include "test_util.h"

namespace synclog::test {
namespace {

namespace fs = std::filesystem;

uint64_t wall_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

void flip_byte(const fs::path& file, uint64_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x5a));
}

// The reference archive_command of docs/config.md: the copy is durable
// (fsynced, renamed into place, the directory fsynced) before it exits 0.
std::string durable_copy_command(const fs::path& dir) {
  const std::string d = dir.string();
  return "cp %p " + d + "/%f.tmp && sync " + d + "/%f.tmp && mv -f " + d + "/%f.tmp " + d +
         "/%f && sync " + d;
}

// A log written with archive_command copying into `archive`, and what it
// holds: the oracle every restore is compared with.
struct History {
  TempDir live;
  TempDir archive_root;
  fs::path archive() const { return archive_root.path() / "segments"; }
  fs::path gate() const { return archive_root.path() / "succeed"; }
  TempDir out_root;
  fs::path target() const { return out_root.path() / "restored"; }
  std::vector<Replayed> records;  // every record, in log order
  // times[i]: wall time taken after record i-1 was acknowledged and before
  // record i was appended (batch mode: an append returns once durable).
  std::vector<uint64_t> times;
  std::vector<Position> batch;  // the positions of one write batch in the middle
  // Small segments and every tenth record spanning several of them, in
  // fragments.
  bool large = false;

  // Records compressed (zstd) and encrypted under the key in key_file().
  bool encrypted = false;
  fs::path key_file() const { return archive_root.path() / "keys"; }

  Config sized(Config cfg) const {
    if (large) {
      cfg.segment_size = 64 << 10;
      cfg.max_record = 300 << 10;
    }
    if (encrypted) {
      cfg.compression = Compression::zstd;
      cfg.encryption = Encryption::aes_256_gcm;
      cfg.encryption_key_file = key_file();
    }
    return cfg;
  }

  Config config(bool gated = false) const {
    Config cfg = sized(small_config(live.path()));
    cfg.archive_command = (gated ? "test -e " + gate().string() + " && " : std::string()) +
                          durable_copy_command(archive());
    return cfg;
  }

  History() {
    fs::create_directories(archive());
    std::ofstream(key_file())
        << "7 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n";
    fs::permissions(key_file(), fs::perms::owner_read | fs::perms::owner_write);
  }

  // Appends `n` records (and a batch of three after the first half), with a
  // time before each; with `gated`, the archive command fails until the
  // gate file exists, which it does before the end.
  void write(int n, bool gated = false) {
    if (!gated) std::ofstream(gate()).put('1');
    auto log = Log::open(config(true));
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    for (int i = 0; i < n; ++i) {
      if (i == n / 2) {
        const std::string a = make_record(2, 0, 100), b, c = make_record(2, 2, 3000);
        const std::string_view parts[] = {a, b, c};
        times.push_back(wall_ns());
        auto pos = (*log)->append_batch(parts);
        ASSERT_TRUE(pos.has_value()) << pos.error().describe();
        batch = *pos;
        records.push_back({(*pos)[0], a});
        times.push_back(times.back());
        records.push_back({(*pos)[1], b});
        times.push_back(times.back());
        records.push_back({(*pos)[2], c});
      }
      const std::string rec =
          make_record(1, static_cast<uint64_t>(i), large && i % 10 == 5 ? 200'000 : 8000);
      times.push_back(wall_ns());
      auto pos = (*log)->append(rec);
      ASSERT_TRUE(pos.has_value()) << pos.error().describe();
      records.push_back({*pos, rec});
    }
    if (gated) {
      // Nothing could be archived, so nothing was released.
      auto released = (*log)->release_before((*log)->durable());
      ASSERT_TRUE(released.has_value()) << released.error().describe();
      EXPECT_TRUE(released->ids.empty());
      EXPECT_FALSE(released->unarchived.empty());
      std::ofstream(gate()).put('1');
    }
    // Let the archive catch up, release what it holds: the live directory
    // keeps only the newest segments.
    const uint64_t last = (*log)->durable().segment();
    ASSERT_TRUE(eventually([&] { return (*log)->stats().segments_archived >= last - 1; }))
        << (*log)->stats().archive_error;
    auto released = (*log)->release_before((*log)->durable());
    ASSERT_TRUE(released.has_value()) << released.error().describe();
    const std::vector<Replayed> kept = read_all(**log);
    ASSERT_LT(kept.size(), records.size()) << "release let nothing go";
    ASSERT_TRUE(same_records(
        kept,
        std::vector<Replayed>(records.end() - static_cast<ptrdiff_t>(kept.size()), records.end())));
    ASSERT_TRUE((*log)->close().has_value());
  }

  // Opens the log again until the segment close() completed is archived
  // too: then the archive holds the whole log.
  void archive_all() {
    auto log = Log::open(config());
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    ASSERT_TRUE(eventually([&] { return (*log)->stats().archive_pending == 0; }))
        << (*log)->stats().archive_error;
    ASSERT_TRUE((*log)->close().has_value());
  }

  void drop_live() { fs::remove_all(live.path()); }

  // A session that dies: a child process opens the log, appends `n`
  // records of thread `thread` (each acknowledged, nothing in flight) and
  // _exit()s without close(), as a crash leaves it (the page cache
  // survives). The next open must replay them: they join `records`.
  void crash_after(int n, uint32_t thread) {
    std::cout.flush();
    std::cerr.flush();
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0) << std::strerror(errno);
    if (pid == 0) {
      auto log = Log::open(config());
      if (!log) ::_exit(3);
      for (int i = 0; i < n; ++i) {
        if (!(*log)->append(make_record(thread, static_cast<uint64_t>(i), 3000))) ::_exit(4);
      }
      // No archive command in flight at the crash: one would outlive this
      // process holding the LOCK (archive_chain_test covers that case).
      for (int i = 0; i < 2000 && (*log)->stats().archive_pending != 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      ::_exit(9);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 9) << status;
    crashed_thread = thread;
    crashed_count = n;
  }

  // Opens the log after a crash, checks it replays what was acknowledged,
  // appends `more`, waits until the archive holds every complete segment
  // (the crashed session's last one included) and closes.
  void reopen(int more) {
    auto log = Log::open(config());
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    const std::vector<Replayed> replayed = read_all(**log);
    ASSERT_GE(replayed.size(), static_cast<size_t>(crashed_count));
    const std::vector<Replayed> tail(replayed.end() - crashed_count, replayed.end());
    for (int i = 0; i < crashed_count; ++i) {
      ASSERT_EQ(tail[static_cast<size_t>(i)].data,
                make_record(crashed_thread, static_cast<uint64_t>(i), 3000))
          << i;
      records.push_back(tail[static_cast<size_t>(i)]);
    }
    crash_end = records.size();
    for (int i = 0; i < more; ++i) {
      const std::string rec = make_record(crashed_thread + 1, static_cast<uint64_t>(i), 500);
      times.push_back(wall_ns());
      auto pos = (*log)->append(rec);
      ASSERT_TRUE(pos.has_value()) << pos.error().describe();
      records.push_back({*pos, rec});
    }
    ASSERT_TRUE(eventually([&] { return (*log)->stats().archive_pending == 0; }))
        << (*log)->stats().archive_error;
    ASSERT_TRUE((*log)->close().has_value());
  }
  uint32_t crashed_thread = 0;
  int crashed_count = 0;
  size_t crash_end = 0;  // records.size() once the crashed session's are in

  RestoreOptions options() const {
    RestoreOptions o;
    o.archive = archive();
    // The live directory once deleted (drop_live) is left out, as an
    // operator restoring from the archive alone leaves out --live.
    if (fs::exists(live.path())) o.live = live.path();
    o.target = target();
    return o;
  }

  std::set<uint64_t> archived_ids() const {
    std::set<uint64_t> ids;
    for (const auto& e : fs::directory_iterator(archive())) {
      uint64_t id = 0;
      if (seg::parse_segment_file_name(e.path().filename().string(), &id)) ids.insert(id);
    }
    return ids;
  }

  // synclog-restore from this history's archive and live directory into
  // target(), its output in out_root/out; its exit status.
  int run_tool(const std::string& args) const {
    const std::string cmd = std::string(SYNCLOG_RESTORE_BIN) + " --archive " + archive().string() +
                            " --live " + live.path().string() + " --target " + target().string() +
                            " " + args + " > " + (out_root.path() / "out").string() + " 2>&1";
    const int rc = std::system(cmd.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  }

  // A restore to a time after everything (into an empty target) gives
  // back the whole log.
  void expect_whole_by_time() const {
    fs::remove_all(target());
    RestoreOptions o = options();
    o.stop = RestoreStop::time;
    o.time_ns = wall_ns();
    auto r = restore(o);
    ASSERT_TRUE(r.has_value()) << r.error().describe();
    EXPECT_TRUE(same_records(replay_restored(), records));
  }

  // The restored log, opened as any log is, and then continued.
  std::vector<Replayed> replay_restored() const {
    Config cfg = sized(small_config(target()));
    auto log = Log::open(cfg);
    EXPECT_TRUE(log.has_value()) << log.error().describe();
    if (!log) return {};
    EXPECT_FALSE((*log)->recovery().torn_tail);
    EXPECT_TRUE((*log)->recovery().damage.empty());
    std::vector<Replayed> out = read_all(**log);
    auto more = (*log)->append("after the restore");
    EXPECT_TRUE(more.has_value()) << more.error().describe();
    EXPECT_TRUE((*log)->close().has_value());
    return out;
  }
};

std::vector<Replayed> first(const std::vector<Replayed>& all, size_t n) {
  return std::vector<Replayed>(all.begin(), all.begin() + static_cast<ptrdiff_t>(n));
}

// How many records a restore to times[k] may keep: k, or k - 1 when record
// k - 1 is the last of its segment. Its sync then may have had no room for
// a marker (tail=pad pads the marker to a block), and only a marker carries
// a time; the next marker began after the stop time (docs/durability.md,
// Restore).
bool time_stop_keeps(const std::vector<Replayed>& restored, const std::vector<Replayed>& all,
                     size_t k) {
  if (same_records(restored, first(all, k))) return true;
  return k >= 1 && k < all.size() && all[k].position.segment() > all[k - 1].position.segment() &&
         same_records(restored, first(all, k - 1));
}

TEST(Restore, ToTheEndFromTheArchiveAlone) {
  History h;
  h.write(120);
  h.archive_all();
  h.drop_live();
  auto r = restore(h.options());
  ASSERT_TRUE(r.has_value()) << r.error().describe();
  EXPECT_TRUE(r->from_live.empty());
  EXPECT_EQ(std::set<uint64_t>(r->from_archive.begin(), r->from_archive.end()), h.archived_ids());
  EXPECT_EQ(r->records, h.records.size());
  EXPECT_EQ(r->last, h.records.back().position);
  EXPECT_EQ(r->stop, RestoreStop::end);
  EXPECT_TRUE(same_records(h.replay_restored(), h.records));
  // The archive is only read.
  EXPECT_EQ(h.archived_ids().size(), r->from_archive.size());
}

TEST(Restore, ToTheEndFromArchiveAndLiveDirectory) {
  History h;
  h.write(120);
  // The live directory holds the newest segments, unarchived, and maybe
  // some archived ones still: identical in both.
  auto r = restore(h.options());
  ASSERT_TRUE(r.has_value()) << r.error().describe();
  EXPECT_FALSE(r->from_archive.empty());
  EXPECT_FALSE(r->from_live.empty()) << "the segment close() completed is not archived yet";
  EXPECT_TRUE(same_records(h.replay_restored(), h.records));
}

TEST(Restore, ToAPositionInTheMiddleIsInclusive) {
  History h;
  h.write(120);
  for (size_t k : {size_t{0}, size_t{17}, h.records.size() / 2 + 20, h.records.size() - 2}) {
    fs::remove_all(h.target());
    RestoreOptions o = h.options();
    o.stop = RestoreStop::position;
    o.position = h.records[k].position;
    auto r = restore(o);
    ASSERT_TRUE(r.has_value()) << k << ": " << r.error().describe();
    EXPECT_EQ(r->records, k + 1);
    EXPECT_EQ(r->last, h.records[k].position);
    // Later segments are not in the restored log (until it is continued).
    for (uint64_t id : r->dropped) {
      EXPECT_FALSE(fs::exists(h.target() / seg::segment_file_name(id))) << id;
      EXPECT_GT(id, h.records[k].position.segment());
    }
    EXPECT_TRUE(same_records(h.replay_restored(), first(h.records, k + 1))) << k;
  }
}

TEST(Restore, APositionInsideABatchOrPastTheEndIsRefused) {
  History h;
  h.write(60);
  RestoreOptions o = h.options();
  o.stop = RestoreStop::position;
  o.position = h.batch[1];
  auto r = restore(o);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::invalid_argument);
  EXPECT_NE(r.error().message.find("write batch"), std::string::npos) << r.error().message;
  EXPECT_FALSE(fs::exists(h.target()));
  EXPECT_FALSE(fs::exists(h.target().string() + ".restoring"));

  // The batch's last record keeps it whole.
  o.position = h.batch[2];
  r = restore(o);
  ASSERT_TRUE(r.has_value()) << r.error().describe();
  size_t upto = 0;
  while (h.records[upto].position != h.batch[2]) ++upto;
  EXPECT_TRUE(same_records(h.replay_restored(), first(h.records, upto + 1)));

  fs::remove_all(h.target());
  o.position = Position(h.records.back().position.segment() + 5, 64);
  r = restore(o);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::invalid_argument);
  EXPECT_NE(r.error().message.find("past the end"), std::string::npos) << r.error().message;
}

TEST(Restore, ToATimeKeepsExactlyTheRecordsAcknowledgedBeforeIt) {
  History h;
  h.write(120);
  h.archive_all();
  h.drop_live();
  // times[k] was taken after record k-1 was acknowledged and before record
  // k was appended: restoring to it keeps records 0..k-1.
  for (size_t k : {size_t{1}, size_t{40}, h.records.size() / 2, h.records.size() - 1}) {
    if (h.times[k] == h.times[k - 1]) continue;  // inside the batch: one time for all
    fs::remove_all(h.target());
    RestoreOptions o = h.options();
    o.stop = RestoreStop::time;
    o.time_ns = h.times[k];
    auto r = restore(o);
    ASSERT_TRUE(r.has_value()) << k << ": " << r.error().describe();
    EXPECT_EQ(r->stop, RestoreStop::time);
    EXPECT_TRUE(time_stop_keeps(h.replay_restored(), h.records, k)) << k << ": " << r->reason;
  }
  // Before the first record: nothing to restore, said so.
  fs::remove_all(h.target());
  RestoreOptions o = h.options();
  o.stop = RestoreStop::time;
  o.time_ns = h.times[0];
  auto r = restore(o);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::invalid_argument);
  EXPECT_FALSE(fs::exists(h.target()));
  // After everything: the whole log.
  o.time_ns = wall_ns();
  r = restore(o);
  ASSERT_TRUE(r.has_value()) << r.error().describe();
  EXPECT_TRUE(same_records(h.replay_restored(), h.records));
}

TEST(Restore, AMissingArchivedSegmentIsAnErrorNamingIt) {
  History h;
  h.write(120);
  h.archive_all();
  h.drop_live();
  const std::set<uint64_t> ids = h.archived_ids();
  ASSERT_GE(ids.size(), 4u);
  const uint64_t gone = *std::next(ids.begin(), 2);
  fs::remove(h.archive() / seg::segment_file_name(gone));
  auto r = restore(h.options());
  ASSERT_FALSE(r.has_value()) << "restored " << r->records << " records over a hole";
  EXPECT_EQ(r.error().code, Errc::corruption);
  EXPECT_NE(r.error().message.find("segment " + std::to_string(gone) + " is missing"),
            std::string::npos)
      << r.error().message;
  EXPECT_FALSE(fs::exists(h.target()));
  EXPECT_FALSE(fs::exists(h.target().string() + ".restoring"));
  // Also when the stop point lies before the hole: the chain is judged whole.
  RestoreOptions o = h.options();
  o.stop = RestoreStop::position;
  o.position = h.records[0].position;
  EXPECT_FALSE(restore(o).has_value());
}

TEST(Restore, ADamagedArchivedCopyIsAnError) {
  History h;
  h.write(120);
  h.archive_all();
  h.drop_live();
  const std::set<uint64_t> ids = h.archived_ids();
  // A record in the middle of the chain, and one in its last segment
  // (where no later sync marker could prove it was durable).
  for (uint64_t id : {*std::next(ids.begin()), *ids.rbegin()}) {
    SCOPED_TRACE(id);
    TempDir copy;
    fs::copy(h.archive(), copy.path() / "a");
    uint64_t offset = 0;
    for (const auto& rec : h.records) {
      if (rec.position.segment() == id && rec.data.size() > 100) offset = rec.position.offset();
    }
    if (offset == 0) continue;  // the last segment may hold markers only
    flip_byte(copy.path() / "a" / seg::segment_file_name(id), offset + 40);
    RestoreOptions o = h.options();
    o.archive = copy.path() / "a";
    auto r = restore(o);
    ASSERT_FALSE(r.has_value()) << "restored " << r->records << " of " << h.records.size();
    EXPECT_EQ(r.error().code, Errc::corruption) << r.error().message;
    EXPECT_FALSE(fs::exists(h.target()));
  }
  // A copy cut short, as an interrupted archive command leaves it.
  TempDir copy;
  fs::copy(h.archive(), copy.path() / "a");
  const fs::path last = copy.path() / "a" / seg::segment_file_name(*ids.rbegin());
  fs::resize_file(last, 4096);
  RestoreOptions o = h.options();
  o.archive = copy.path() / "a";
  auto r = restore(o);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("cut short"), std::string::npos) << r.error().message;

  // A whole copy whose last records (and the sync marker after them) are
  // wiped: no marker proves them durable, so recovery alone takes that for
  // a crash's torn tail, but the segment's end record after them shows it
  // was completed (a crashed segment never has one).
  fs::remove_all(copy.path() / "a");
  fs::copy(h.archive(), copy.path() / "a");
  uint32_t from = 0;
  for (const auto& rec : h.records) {
    if (rec.position.segment() == *ids.rbegin()) from = rec.position.offset();
  }
  ASSERT_NE(from, 0u);
  auto reader = seg::SegmentReader::open(last, *ids.rbegin());
  ASSERT_TRUE(reader.has_value()) << reader.error().describe();
  uint32_t end_at = from;
  for (;;) {
    auto d = reader->frame(end_at);
    ASSERT_TRUE(d.has_value()) << d.error().describe();
    ASSERT_EQ(d->status, seg::Decode::ok) << end_at;
    if (d->record.kind == seg::Kind::end) break;
    end_at += d->record.framed;
  }
  {
    std::fstream f(last, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(from);
    const std::string zeros(end_at - from, '\0');
    f.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  }
  r = restore(o);
  ASSERT_FALSE(r.has_value()) << "restored " << r->records << " of " << h.records.size();
  EXPECT_EQ(r.error().code, Errc::corruption);
  EXPECT_NE(r.error().message.find("before its end record"), std::string::npos)
      << r.error().message;
  EXPECT_FALSE(fs::exists(h.target()));
}

// After a process crash the next session archives the crashed session's
// last segment at once: it has no end record (the process died), and its
// records end where that session's recovery found them ending. Restore
// takes it as complete up to that end (docs/durability.md, Restore).
TEST(Restore, AfterACrashFromArchiveAndLiveDirectory) {
  History h;
  h.write(60);
  h.crash_after(30, 7);
  h.reopen(0);
  ASSERT_TRUE(h.archived_ids().count(h.records.back().position.segment()))
      << "the crashed session's last segment was not archived";
  auto r = restore(h.options());
  ASSERT_TRUE(r.has_value()) << r.error().describe();
  EXPECT_TRUE(same_records(h.replay_restored(), h.records));
  // To a position in the crashed session's last segment, and before it.
  for (size_t k : {h.records.size() - 3, h.records.size() - 40}) {
    fs::remove_all(h.target());
    RestoreOptions o = h.options();
    o.stop = RestoreStop::position;
    o.position = h.records[k].position;
    r = restore(o);
    ASSERT_TRUE(r.has_value()) << k << ": " << r.error().describe();
    EXPECT_TRUE(same_records(h.replay_restored(), first(h.records, k + 1))) << k;
  }
  // And to a time after everything.
  h.expect_whole_by_time();
}

TEST(Restore, AfterACrashFromTheArchiveAlone) {
  History h;
  h.write(60);
  h.crash_after(30, 7);
  h.reopen(5);
  h.drop_live();
  // The last session's segment was active at its close: not archived. The
  // crashed session's records all are.
  auto r = restore(h.options());
  ASSERT_TRUE(r.has_value()) << r.error().describe();
  EXPECT_TRUE(r->from_live.empty());
  EXPECT_TRUE(same_records(h.replay_restored(), first(h.records, h.crash_end)));
  fs::remove_all(h.target());
  RestoreOptions o = h.options();
  o.stop = RestoreStop::position;
  o.position = h.records[h.crash_end - 2].position;
  r = restore(o);
  ASSERT_TRUE(r.has_value()) << r.error().describe();
  EXPECT_TRUE(same_records(h.replay_restored(), first(h.records, h.crash_end - 1)));
}

TEST(Restore, ASegmentInBothPlacesMustBeIdentical) {
  History h;
  h.write(120);
  h.archive_all();  // every live segment is now archived as well
  auto r = restore(h.options());
  ASSERT_TRUE(r.has_value()) << r.error().describe();
  EXPECT_FALSE(r->in_both.empty());
  EXPECT_TRUE(same_records(h.replay_restored(), h.records));

  fs::remove_all(h.target());
  const uint64_t id = r->in_both.front();
  flip_byte(h.live.path() / seg::segment_file_name(id), 200);
  r = restore(h.options());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::corruption);
  EXPECT_NE(r.error().message.find("segment " + std::to_string(id) + " differs"), std::string::npos)
      << r.error().message;
}

TEST(Restore, AFailingArchiveCommandLosesNothing) {
  History h;
  h.write(120, /*gated=*/true);
  h.archive_all();
  h.drop_live();
  auto r = restore(h.options());
  ASSERT_TRUE(r.has_value()) << r.error().describe();
  EXPECT_TRUE(same_records(h.replay_restored(), h.records));
}

TEST(Restore, RefusesAnExistingTargetAndALiveLogInUse) {
  History h;
  h.write(40);
  fs::create_directories(h.target());
  auto r = restore(h.options());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::bad_directory);
  EXPECT_NE(r.error().message.find("exists"), std::string::npos) << r.error().message;
  fs::remove_all(h.target());

  auto log = Log::open(h.config());
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  r = restore(h.options());
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("in use"), std::string::npos) << r.error().message;
  EXPECT_FALSE(fs::exists(h.target()));
  ASSERT_TRUE((*log)->close().has_value());
}

// A record in fragments is restored whole or not at all, whichever side of
// the stop point its position lies.
TEST(Restore, FragmentedRecordsStayWhole) {
  History h;
  h.large = true;
  h.write(40);
  h.archive_all();
  h.drop_live();
  for (size_t k : {size_t{4}, size_t{5}, size_t{15}, size_t{26}}) {
    SCOPED_TRACE(k);
    ASSERT_LT(k, h.records.size());
    fs::remove_all(h.target());
    RestoreOptions o = h.options();
    o.stop = RestoreStop::position;
    o.position = h.records[k].position;
    auto r = restore(o);
    ASSERT_TRUE(r.has_value()) << r.error().describe();
    EXPECT_TRUE(same_records(h.replay_restored(), first(h.records, k + 1)));
    fs::remove_all(h.target());
    o.stop = RestoreStop::time;
    o.time_ns = h.times[k];
    r = restore(o);
    ASSERT_TRUE(r.has_value()) << r.error().describe();
    EXPECT_TRUE(time_stop_keeps(h.replay_restored(), h.records, k));
  }
  fs::remove_all(h.target());
  auto r = restore(h.options());
  ASSERT_TRUE(r.has_value()) << r.error().describe();
  EXPECT_TRUE(same_records(h.replay_restored(), h.records));
}

// Segments before format version 6 have no time in their markers: a
// restore to a time over them alone is refused, never an empty or a guessed
// log; to the end or a position they restore as any other.
TEST(Restore, SegmentsBeforeVersion6CannotBeRestoredToATime) {
  History h;
  h.write(60);
  h.archive_all();
  h.drop_live();
  for (uint64_t id : h.archived_ids()) {
    // The header as a version-5 writer made it (the markers' second u64
    // then reads as padding).
    const fs::path file = h.archive() / seg::segment_file_name(id);
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    std::vector<std::byte> head(seg::kHeaderSize);
    f.read(reinterpret_cast<char*>(head.data()), seg::kHeaderSize);
    const uint32_t version = 5;
    std::memcpy(&head[8], &version, 4);
    const uint32_t crc = io::crc32c(0, std::span(head).first(seg::kHeaderSize - 4));
    std::memcpy(&head[60], &crc, 4);
    f.seekp(0);
    f.write(reinterpret_cast<const char*>(head.data()), seg::kHeaderSize);
  }
  RestoreOptions o = h.options();
  o.stop = RestoreStop::time;
  o.time_ns = wall_ns();
  auto r = restore(o);
  ASSERT_FALSE(r.has_value()) << r->records << " records restored without a time";
  EXPECT_EQ(r.error().code, Errc::invalid_argument);
  EXPECT_NE(r.error().message.find("before format version 6 carry no time"), std::string::npos)
      << r.error().message;
  EXPECT_FALSE(fs::exists(h.target()));
  o.stop = RestoreStop::end;
  r = restore(o);
  ASSERT_TRUE(r.has_value()) << r.error().describe();
  EXPECT_TRUE(same_records(h.replay_restored(), h.records));
}

// synclog-restore runs the same restore; its exit status tells success (0),
// a refused restore (1) and bad usage (2) apart.
TEST(Restore, TheToolRestoresToAPositionAndATime) {
  History h;
  h.write(60);
  auto run = [&](const std::string& args) { return h.run_tool(args); };
  const size_t k = 25;
  EXPECT_EQ(run("--to-position " + h.records[k].position.to_string()), 0);
  EXPECT_TRUE(same_records(h.replay_restored(), first(h.records, k + 1)));
  EXPECT_EQ(run("--to-position " + h.records[k].position.to_string()), 1) << "target exists";
  fs::remove_all(h.target());
  EXPECT_EQ(run("--to-time " + std::to_string(h.times[k])), 0);
  EXPECT_TRUE(same_records(h.replay_restored(), first(h.records, k)));
  fs::remove_all(h.target());
  EXPECT_EQ(run("--to-time yesterday"), 2);
  EXPECT_EQ(run("--to-position 7"), 2);
  EXPECT_FALSE(fs::exists(h.target()));
}

// An encrypted, compressed log restores with its key source: the tool's
// --key-file to a position and to a time, the API's callback to the end.
// The restored log opens with the same keys. Without a key, the restore is
// refused and says what to pass.
TEST(Restore, AnEncryptedCompressedLogRestoresWithItsKeys) {
  History h;
  h.encrypted = true;
  h.write(60);
  auto run = [&](const std::string& args) { return h.run_tool(args); };
  auto output = [&] {
    std::ifstream in(h.out_root.path() / "out");
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string key = " --key-file " + h.key_file().string();
  const size_t k = 25;
  EXPECT_EQ(run("--to-position " + h.records[k].position.to_string() + key), 0) << output();
  EXPECT_TRUE(same_records(h.replay_restored(), first(h.records, k + 1)));
  fs::remove_all(h.target());
  EXPECT_EQ(run("--to-time " + std::to_string(h.times[k]) + key), 0) << output();
  EXPECT_TRUE(time_stop_keeps(h.replay_restored(), h.records, k));
  fs::remove_all(h.target());

  EXPECT_EQ(run("--to-position " + h.records[k].position.to_string()), 1);
  EXPECT_NE(output().find("--key-file"), std::string::npos) << output();
  EXPECT_FALSE(fs::exists(h.target()));
  EXPECT_EQ(run("--key-file " + (h.out_root.path() / "no-such-keys").string()), 1);
  EXPECT_FALSE(fs::exists(h.target()));

  RestoreOptions o = h.options();
  o.encryption_keys = [](std::optional<uint32_t>) -> Result<EncryptionKey> {
    EncryptionKey key;
    key.id = 7;
    for (size_t i = 0; i < key.bytes.size(); ++i) {
      key.bytes[i] = static_cast<std::byte>(((i % 16) << 4) | (i % 16));
    }
    return key;
  };
  auto r = restore(o);
  ASSERT_TRUE(r.has_value()) << r.error().describe();
  EXPECT_TRUE(same_records(h.replay_restored(), h.records));
  fs::remove_all(h.target());
  // Both sources at once is a usage error.
  o.encryption_key_file = h.key_file();
  r = restore(o);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::invalid_argument);
}

// A --live that names no log is refused, never read as "no live
// segments": a path that does not exist, and a directory that is not a log
// (nothing is written into it, not even a LOCK file). Segments of two
// different logs are refused naming both log ids.
TEST(Restore, ALiveDirectoryThatIsNoLogOrAnotherLogIsRefused) {
  History h;
  h.write(40);
  RestoreOptions o = h.options();
  o.live = h.live.path().string() + "-typo";
  auto r = restore(o);
  ASSERT_FALSE(r.has_value()) << "restored " << r->records << " records without the live ones";
  EXPECT_EQ(r.error().code, Errc::bad_directory);
  EXPECT_NE(r.error().message.find("does not exist"), std::string::npos) << r.error().message;
  EXPECT_FALSE(fs::exists(h.target()));

  TempDir other;
  std::ofstream(other.path() / "notes.txt") << "not a log\n";
  o.live = other.path();
  r = restore(o);
  ASSERT_FALSE(r.has_value()) << "restored " << r->records << " records";
  EXPECT_EQ(r.error().code, Errc::bad_directory);
  EXPECT_NE(r.error().message.find("not a log directory"), std::string::npos) << r.error().message;
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(other.path())) {
    names.insert(e.path().filename().string());
  }
  EXPECT_EQ(names, std::set<std::string>{"notes.txt"});
  EXPECT_FALSE(fs::exists(h.target()));

  History g;
  g.write(40);
  auto log_id = [](const fs::path& dir) {
    for (const auto& e : fs::directory_iterator(dir)) {
      uint64_t id = 0;
      if (!seg::parse_segment_file_name(e.path().filename().string(), &id)) continue;
      std::ifstream in(e.path(), std::ios::binary);
      std::vector<std::byte> head(seg::kHeaderSize);
      in.read(reinterpret_cast<char*>(head.data()), seg::kHeaderSize);
      auto header = seg::decode_header(head);
      EXPECT_TRUE(header.has_value());
      return header ? header->log_id : 0;
    }
    return uint64_t{0};
  };
  auto hex = [](uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return std::string(buf);
  };
  o.live = g.live.path();
  r = restore(o);
  ASSERT_FALSE(r.has_value()) << "restored " << r->records << " records from two logs";
  const std::string& m = r.error().message;
  EXPECT_NE(m.find("two different logs"), std::string::npos) << m;
  EXPECT_NE(m.find(hex(log_id(h.archive()))), std::string::npos) << m;
  EXPECT_NE(m.find(hex(log_id(g.live.path()))), std::string::npos) << m;
  EXPECT_EQ(m.find("one is damaged"), std::string::npos) << m;
  EXPECT_FALSE(fs::exists(h.target()));
}

// An archived copy that ARCHIVED (in the live directory) does not confirm
// may be a partial copy a power cut left: restore takes the live
// directory's copy of that segment instead of refusing. A confirmed copy
// that differs is still refused.
TEST(Restore, AnUnconfirmedArchivedCopyGivesWayToTheLiveOne) {
  History h;
  h.write(120);
  h.archive_all();
  std::set<uint64_t> in_live;
  for (const auto& e : fs::directory_iterator(h.live.path())) {
    uint64_t id = 0;
    if (seg::parse_segment_file_name(e.path().filename().string(), &id)) in_live.insert(id);
  }
  const std::set<uint64_t> archived = h.archived_ids();
  uint64_t id = 0;
  for (uint64_t a : archived) {
    if (in_live.count(a)) id = a;
  }
  ASSERT_NE(id, 0u) << "no segment in both places";
  // The copy of `id` as a cut left it (zeros past its first block), and
  // ARCHIVED as it was before that copy was confirmed.
  const fs::path copy = h.archive() / seg::segment_file_name(id);
  const auto size = fs::file_size(copy);
  fs::resize_file(copy, 4096);
  fs::resize_file(copy, size);
  const fs::path state = h.live.path() / seg::kArchiveStateName;
  std::ifstream in(state);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  in.close();
  const std::string through = "through " + std::to_string(*archived.rbegin());
  ASSERT_NE(text.find(through), std::string::npos) << text;
  text.replace(text.find(through), through.size(), "through " + std::to_string(id - 1));
  std::ofstream(state, std::ios::trunc) << text;

  auto r = restore(h.options());
  ASSERT_TRUE(r.has_value()) << r.error().describe();
  EXPECT_NE(std::find(r->from_live.begin(), r->from_live.end(), id), r->from_live.end());
  EXPECT_TRUE(same_records(h.replay_restored(), h.records));

  // Confirmed by ARCHIVED, a copy that differs is damage: refused.
  fs::remove_all(h.target());
  std::ofstream(state, std::ios::trunc)
      << text.replace(text.find("through "), std::string::npos,
                      "through " + std::to_string(*archived.rbegin()) + "\n");
  r = restore(h.options());
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("differs"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace synclog::test
