// The log directory as an operator meets it: who may read the files, what a
// held lock says, what a refused open leaves behind, a log at the root of
// its own filesystem (lost+found), a directory the log creates, and log
// files swapped for symbolic links.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "test_util.h"

namespace synclog::test {
namespace {

namespace fs = std::filesystem;

uint32_t mode_of(const fs::path& p) {
  struct stat st;
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

// Opens, appends, releases (so a file is recycled or deleted) and closes.
void write_some(const Config& cfg) {
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  Position last;
  for (uint64_t i = 0; i < 400; ++i) {
    auto pos = (*log)->append(make_record(1, i, 2000));
    ASSERT_TRUE(pos.has_value()) << pos.error().describe();
    last = *pos;
  }
  ASSERT_GT(last.segment(), 2u);
  ASSERT_TRUE((*log)->release_before(Position(2, 0)).has_value());
  ASSERT_TRUE((*log)->close().has_value());
}

// Every file the log made gets `want`, whatever the umask lets through.
void expect_modes(const fs::path& dir, uint32_t want) {
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    ++files;
    EXPECT_EQ(mode_of(e.path()), want)
        << e.path() << " has mode 0" << std::oct << mode_of(e.path());
  }
  EXPECT_GT(files, 2u);
}

class UmaskGuard {
 public:
  explicit UmaskGuard(mode_t m) : old_(::umask(m)) {}
  ~UmaskGuard() { ::umask(old_); }

 private:
  mode_t old_;
};

TEST(Directory, FilesAreOwnerOnlyByDefault) {
  UmaskGuard umask(0);  // the log's own choice, not the umask's
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(write_some(small_config(dir.path())));
  expect_modes(dir.path(), 0600);
}

TEST(Directory, GroupReadMakesFilesGroupReadable) {
  UmaskGuard umask(0);
  TempDir dir;
  Config cfg = small_config(dir.path());
  auto set = cfg.set("group_read", "true");
  ASSERT_TRUE(set.has_value()) << set.error().describe();
  ASSERT_NO_FATAL_FAILURE(write_some(cfg));
  expect_modes(dir.path(), 0640);
}

TEST(Directory, HeldLockNamesTheHoldersPid) {
  TempDir dir;
  const Config cfg = small_config(dir.path());
  auto first = Log::open(cfg);
  ASSERT_TRUE(first.has_value()) << first.error().describe();
  // flock locks belong to the open file, so a second open in this process
  // finds the lock held just as another process would.
  auto second = Log::open(cfg);
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().code, Errc::bad_directory);
  EXPECT_NE(second.error().message.find("in use by another process (pid " +
                                        std::to_string(::getpid()) + " holds the lock"),
            std::string::npos)
      << second.error().message;
  ASSERT_TRUE((*first)->close().has_value());
  auto third = Log::open(cfg);
  EXPECT_TRUE(third.has_value()) << third.error().describe();
}

TEST(Directory, RefusedOpenLeavesNoLockBehind) {
  TempDir dir;
  std::ofstream(dir.path() / "notes.txt") << "not a log file\n";
  auto log = Log::open(small_config(dir.path()));
  ASSERT_FALSE(log.has_value());
  EXPECT_EQ(log.error().code, Errc::bad_directory);
  EXPECT_NE(log.error().message.find("foreign file 'notes.txt'"), std::string::npos)
      << log.error().message;
  EXPECT_FALSE(fs::exists(dir.path() / "LOCK"))
      << "a refused open left LOCK in a foreign directory";
  EXPECT_TRUE(fs::exists(dir.path() / "notes.txt"));

  // A LOCK that was there before a refused open stays.
  TempDir logdir;
  ASSERT_NO_FATAL_FAILURE(write_some(small_config(logdir.path())));
  std::ofstream(logdir.path() / "stray") << "x";
  auto again = Log::open(small_config(logdir.path()));
  ASSERT_FALSE(again.has_value());
  EXPECT_TRUE(fs::exists(logdir.path() / "LOCK"));
  // A direct open writes its I/O probe's block into LOCK; refused, it
  // leaves no such block behind.
  Config direct = small_config(logdir.path());
  direct.segment_kind = SegmentKind::direct;
  direct.backend = BackendKind::auto_select;
  auto refused = Log::open(direct);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, Errc::bad_directory) << refused.error().describe();
  EXPECT_LT(fs::file_size(logdir.path() / "LOCK"), 64u);
}

TEST(Directory, LostAndFoundIsToleratedAsADirectoryOnly) {
  TempDir dir;
  const Config cfg = small_config(dir.path());
  fs::create_directory(dir.path() / "lost+found");
  ASSERT_NO_FATAL_FAILURE(write_some(cfg));
  auto replayed = replay_all(cfg);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  EXPECT_GT(replayed->size(), 0u);
  EXPECT_TRUE(fs::is_directory(dir.path() / "lost+found"));

  TempDir other;
  std::ofstream(other.path() / "lost+found") << "a file, not fsck's directory";
  auto log = Log::open(small_config(other.path()));
  ASSERT_FALSE(log.has_value());
  EXPECT_NE(log.error().message.find("foreign file 'lost+found'"), std::string::npos)
      << log.error().message;
}

TEST(Directory, MissingDirectoryIsCreatedOnlyWhenAsked) {
  UmaskGuard umask(0);
  TempDir parent;
  const fs::path dir = parent.path() / "wal";
  Config cfg = small_config(dir);
  auto refused = Log::open(cfg);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, Errc::bad_directory);
  EXPECT_NE(refused.error().message.find("create_dir=true"), std::string::npos)
      << refused.error().message;
  EXPECT_FALSE(fs::exists(dir));

  ASSERT_TRUE(cfg.set("create_dir", "true").has_value());
  ASSERT_NO_FATAL_FAILURE(write_some(cfg));
  EXPECT_EQ(mode_of(dir), 0700u);
  // Existing now: opened as it is.
  auto replayed = replay_all(cfg);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  EXPECT_GT(replayed->size(), 0u);

  // Only the last component is created.
  Config deep = small_config(parent.path() / "a" / "b");
  ASSERT_TRUE(deep.set("create_dir", "true").has_value());
  auto nested = Log::open(deep);
  ASSERT_FALSE(nested.has_value());
  EXPECT_EQ(nested.error().code, Errc::bad_directory);
  EXPECT_NE(nested.error().message.find("cannot create log directory"), std::string::npos)
      << nested.error().message;
}

// A file made under looser settings (an older version's 0644) is narrowed
// when it is recycled into a new segment.
TEST(Directory, RecycledFilesAreNarrowedToTheConfiguredMode) {
  UmaskGuard umask(0);
  TempDir dir;
  const Config cfg = small_config(dir.path());
  ASSERT_NO_FATAL_FAILURE(write_some(cfg));
  for (const auto& e : fs::directory_iterator(dir.path())) {
    if (e.path().extension() == ".seg") fs::permissions(e.path(), fs::perms(0644));
  }
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  Position first, last;
  for (uint64_t i = 0; last.segment() < first.segment() + 4; ++i) {
    auto pos = (*log)->append(make_record(1, i, 2000));
    ASSERT_TRUE(pos.has_value()) << pos.error().describe();
    if (i == 0) first = *pos;
    last = *pos;
    // Release the old files early, so that recycled ones are taken again.
    if (i == 10) {
      ASSERT_TRUE((*log)->release_before(first).has_value());
    }
  }
  EXPECT_GT((*log)->stats().segments_recycled, 0u);
  ASSERT_TRUE((*log)->close().has_value());
  expect_modes(dir.path(), 0600);
}

// Records the directories fsynced.
class DirSyncs final : public io::Hook {
 public:
  int before(const io::Event& e) override {
    if (e.op == io::Op::dir_sync) {
      std::lock_guard lock(mu_);
      dirs_.push_back(e.path);
    }
    return 0;
  }
  bool synced(const fs::path& dir) {
    std::lock_guard lock(mu_);
    return std::find(dirs_.begin(), dirs_.end(), dir) != dirs_.end();
  }

 private:
  std::mutex mu_;
  std::vector<fs::path> dirs_;
};

// An earlier open may have made the directory and crashed before its entry
// was durable: finding it present proves nothing, so the parent is synced
// whenever create_dir is set.
TEST(Directory, CreateDirSyncsTheParentEvenWhenTheDirectoryExists) {
  TempDir parent;
  const fs::path dir = parent.path() / "wal";
  fs::create_directory(dir);
  Config cfg = small_config(dir);
  ASSERT_TRUE(cfg.set("create_dir", "true").has_value());
  DirSyncs syncs;
  {
    HookGuard guard(&syncs);
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    ASSERT_TRUE((*log)->close().has_value());
  }
  EXPECT_TRUE(syncs.synced(parent.path()));
}

TEST(Directory, SegmentFileSwappedForALinkIsRefused) {
  TempDir dir;
  const Config cfg = small_config(dir.path());
  ASSERT_NO_FATAL_FAILURE(write_some(cfg));
  // The oldest segment becomes a link to a copy elsewhere: the log must not
  // follow it into a file it does not own.
  fs::path oldest;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    if (e.path().extension() == ".seg" && (oldest.empty() || e.path() < oldest)) oldest = e.path();
  }
  ASSERT_FALSE(oldest.empty());
  TempDir elsewhere;
  const fs::path target = elsewhere.path() / "copy.seg";
  fs::copy_file(oldest, target);
  fs::remove(oldest);
  fs::create_symlink(target, oldest);
  auto log = Log::open(cfg);
  ASSERT_FALSE(log.has_value()) << "opened a log whose segment is a symbolic link";
  EXPECT_NE(log.error().message.find("is a symbolic link"), std::string::npos)
      << log.error().describe();
}

}  // namespace
}  // namespace synclog::test
