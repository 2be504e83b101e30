// Faults during recovery (path 4 of the durability review): an open or a
// read that recovery makes fails with EIO, EMFILE or ENOMEM. Recovery must
// never judge what it could not read: every such open of the log either
// fails with that error, naming the file, or gives exactly what the
// fault-free open gives; and a later fault-free open replays every
// acknowledged record.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "io/hook.h"
#include "segments/format.h"
#include "test_util.h"

namespace synclog::test {
namespace {

namespace fs = std::filesystem;

// Fails the n-th open-for-reading or read (counting from 0) with `err`;
// counts them all. Opens for writing (LOCK, new segments) are not counted:
// they are not recovery's.
class FailNthAccess : public io::Hook {
 public:
  FailNthAccess(long n, int err) : n_(n), err_(err) {}
  int access(const io::Event& e) override {
    if (e.op == io::Op::open && (e.open_flags & O_ACCMODE) != O_RDONLY) return 0;
    const long k = seen_.fetch_add(1);
    if (k != n_) return 0;
    failed_path_ = e.path.string();
    return err_;
  }
  long seen() const { return seen_.load(); }
  const std::string& failed_path() const { return failed_path_; }

 private:
  const long n_;
  const int err_;
  std::atomic<long> seen_{0};
  std::string failed_path_;
};

// Where the valid records of a segment image stop (an empty or bad slot),
// or 0 when the segment ends with an end record.
uint32_t end_of_records(const std::string& file, uint64_t id) {
  auto bytes = std::as_bytes(std::span(file.data(), file.size()));
  for (uint32_t off = seg::kHeaderSize;;) {
    seg::Decoded d = seg::decode_record(bytes, id, off);
    if (d.status != seg::Decode::ok) return off;
    if (d.record.kind == seg::Kind::end) return 0;
    off += d.record.framed;
  }
}

// A crash image: the segment files of a log that is still open, with torn
// bytes written after the last record (a write that no sync completed).
// Spares past the active segment hold only a header.
Files crash_image(const fs::path& dir) {
  Files files = load_segments(dir);
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    const uint32_t end = end_of_records(it->second, it->first);
    EXPECT_NE(end, 0u) << "segment " << it->first << " is closed";
    if (end <= seg::kHeaderSize) continue;
    for (uint32_t i = 0; i < 24 && end + i < it->second.size(); ++i) it->second[end + i] = '\xab';
    return files;
  }
  ADD_FAILURE() << "no segment holds records";
  return files;
}

struct Outcome {
  RecoveryReport report;
  std::vector<Replayed> records;
};

std::string describe(const RecoveryReport& r) {
  std::string s = "end=" + r.end.to_string() + " records=" + std::to_string(r.records) +
                  " segments=" + std::to_string(r.segments) +
                  " torn_tail=" + std::to_string(r.torn_tail) +
                  " torn_bytes=" + std::to_string(r.torn_bytes) + " damage=[";
  for (const Damage& d : r.damage) {
    s += "{" + d.at.to_string() + ", " + std::to_string(d.bytes) + ", " + d.reason + "} ";
  }
  return s + "]";
}

bool same_report(const RecoveryReport& a, const RecoveryReport& b) {
  return describe(a) == describe(b);
}

// Two sessions, each ending in a crash with a torn write after its last
// synced record; the second began after the first's torn tail. Every
// append was acknowledged (batch mode).
struct History {
  Files image;
  std::vector<Replayed> acked;
};

void append_some(Log& log, uint32_t thread, int n, std::vector<Replayed>* acked) {
  for (int i = 0; i < n; ++i) {
    std::string data = make_record(thread, static_cast<uint64_t>(i), 2000 + 37 * (i % 50));
    auto pos = log.append(data);
    ASSERT_TRUE(pos.has_value()) << pos.error().describe();
    acked->push_back(Replayed{*pos, std::move(data)});
  }
}

void build_history(const fs::path& base, History* h) {
  const fs::path first = base / "first";
  fs::create_directories(first);
  {
    auto log = Log::open(small_config(first));
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    ASSERT_NO_FATAL_FAILURE(append_some(**log, 1, 250, &h->acked));  // about 2 segments
    h->image = crash_image(first);
    ASSERT_TRUE((*log)->close().has_value());
  }
  const fs::path second = base / "second";
  write_segments(second, h->image);
  {
    auto log = Log::open(small_config(second));
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    ASSERT_TRUE((*log)->recovery().torn_tail) << describe((*log)->recovery());
    ASSERT_NO_FATAL_FAILURE(append_some(**log, 2, 200, &h->acked));
    h->image = crash_image(second);
    ASSERT_TRUE((*log)->close().has_value());
  }
  ASSERT_GE(h->image.size(), 4u);
}

Result<Outcome> open_and_replay(const Config& cfg, io::Hook* hook) {
  std::unique_ptr<Log> log;
  {
    HookGuard guard(hook);
    auto opened = Log::open(cfg);
    if (!opened) return std::unexpected(opened.error());
    log = std::move(*opened);
  }
  Outcome o{log->recovery(), read_all(*log)};
  auto closed = log->close();
  EXPECT_TRUE(closed.has_value()) << closed.error().describe();
  return o;
}

TEST(RecoveryFault, Path4_EveryFailedReadOrOpenFailsTheOpenOrChangesNothing) {
  TempDir dir;
  History h;
  ASSERT_NO_FATAL_FAILURE(build_history(dir.path(), &h));
  const fs::path work = dir.path() / "work";
  Config cfg = small_config(work);

  write_segments(work, h.image);
  FailNthAccess counter(-1, 0);
  auto clean = open_and_replay(cfg, &counter);
  ASSERT_TRUE(clean.has_value()) << clean.error().describe();
  ASSERT_TRUE(same_records(clean->records, h.acked)) << "fault-free open";
  const long accesses = counter.seen();
  if (getenv("DBG")) std::printf("clean %s\n", describe(clean->report).c_str());
  ASSERT_GT(accesses, 10);

  int failed_opens = 0, unchanged_opens = 0;
  for (int err : {EIO, EMFILE, ENOMEM}) {
    for (long n = 0; n < accesses; ++n) {
      SCOPED_TRACE(std::string(std::strerror(err)) + " at access " + std::to_string(n) + " of " +
                   std::to_string(accesses));
      write_segments(work, h.image);
      FailNthAccess fault(n, err);
      auto o = open_and_replay(cfg, &fault);
      if (!o) {
        ++failed_opens;
        if (getenv("DBG")) std::printf("n=%ld %s\n", n, o.error().describe().c_str());
        EXPECT_EQ(o.error().sys_errno, err) << o.error().describe();
        EXPECT_NE(o.error().message.find(fault.failed_path()), std::string::npos)
            << o.error().describe();
      } else {
        ++unchanged_opens;
        EXPECT_TRUE(same_report(o->report, clean->report))
            << "got " << describe(o->report) << "\nwant " << describe(clean->report);
        EXPECT_TRUE(same_records(o->records, h.acked));
      }
      // Whatever the faulty open did, the log still holds every record.
      auto later = open_and_replay(cfg, nullptr);
      ASSERT_TRUE(later.has_value()) << later.error().describe();
      EXPECT_TRUE(same_records(later->records, h.acked)) << "fault-free open after the fault";
      if (HasFailure()) return;
    }
  }
  std::printf("%ld recovery accesses, 3 errnos: %d opens failed with the error, %d unchanged\n",
              accesses, failed_opens, unchanged_opens);
  EXPECT_GT(failed_opens, 0);
}

}  // namespace
}  // namespace synclog::test
