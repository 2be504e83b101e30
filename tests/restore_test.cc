// Point-in-time restore (docs/durability.md, Restore): a log written with
// archiving, its live directory gone or kept, restored to the end, to a
// position and to a time; the restored log replays exactly the records the
// oracle says, at their positions, byte for byte. A broken chain or a
// damaged copy is an error, never a shorter log.
#include "synclog/restore.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "io/crc32c.h"
#include "segments/format.h"
#include "segments/segment.h"
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

  Config sized(Config cfg) const {
    if (large) {
      cfg.segment_size = 64 << 10;
      cfg.max_record = 300 << 10;
    }
    return cfg;
  }

  Config config(bool gated = false) const {
    Config cfg = sized(small_config(live.path()));
    cfg.archive_command = (gated ? "test -e " + gate().string() + " && " : std::string()) +
                          "cp %p " + archive().string() + "/%f";
    return cfg;
  }

  History() { fs::create_directories(archive()); }

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

  RestoreOptions options() const {
    RestoreOptions o;
    o.archive = archive();
    o.live = live.path();
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
  auto run = [&](const std::string& args) {
    const std::string cmd = std::string(SYNCLOG_RESTORE_BIN) + " --archive " +
                            h.archive().string() + " --live " + h.live.path().string() +
                            " --target " + h.target().string() + " " + args + " > " +
                            (h.out_root.path() / "out").string() + " 2>&1";
    const int rc = std::system(cmd.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
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

}  // namespace
}  // namespace synclog::test
