// Crash-state simulation (after RocksDB's fault-injection file system,
// SQLite's crash tests and FoundationDB's non-durable file).
//
// A Recorder, installed as the process-wide io::Hook, records every
// operation that moves bytes towards stable storage in one log directory,
// with a copy of its bytes, plus the test's own acknowledgements. Every
// before(), after() and ack takes the next number of one global sequence
// under one mutex, so "the crash happened at moment k" means: everything
// whose after() number is below k had completed, everything whose before()
// number is at or above k had not started.
//
// A Simulator turns a recording into the directory a crash at moment k may
// leave behind:
//  - file contents: bytes made durable before k are kept (a write is durable
//    once an fdatasync/fsync that *started after it completed* has itself
//    completed; an RWF_DSYNC direct write at its own completion; an msync'd
//    range at the msync's completion, with the memory captured then). Every
//    other 512-byte sector written before k (in flight included) is
//    independently OLD (its durable contents) or NEW (the latest written).
//    mmap stores are not syscalls: there the unit is the page; its NEW
//    contents are what the page's next msync after k captured (in the same
//    life of the file), OLD what the last msync before k did.
//  - the garbled model also lets each such unsynced sector (or sector of a
//    torn page) come out garbled: the bytes the write was changing, from the
//    first to the last changed one, are random; the bytes it rewrote
//    unchanged keep their value (SQLite's POWERSAFE_OVERWRITE, the
//    assumption docs/durability.md states for acknowledged bytes).
//  - the directory: a file creation, rename or unlink is durable once a
//    directory fsync that started after it completed has completed before k;
//    each one that is not (and started before k) independently happened or
//    not, applied in order (an op whose source is gone is skipped).
// Checker opens the image with Log::open, replays everything and checks G1
// (every append acknowledged before k is there), G2 (a prefix of the log
// order, which is Position order), G3 (byte-identical, nothing extra) and
// that a write batch replays all or none.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "io/hook.h"
#include "synclog/log.h"

namespace synclog::test::crash {

struct RecordedEvent {
  io::Op op{};
  uint64_t begin = 0;  // sequence number at before() (equal to `end` if none was seen)
  uint64_t end = 0;    // sequence number at after(): the operation had completed
  std::string name;    // file name in the log directory; "" for the directory itself
  std::string to;      // rename: the destination name
  uint64_t offset = 0;
  uint64_t length = 0;
  std::vector<std::byte> data;  // write, direct_write: the bytes; msync: the memory synced
};

struct Ack {
  uint64_t seq = 0;
  Position position;
  std::string bytes;
  // The records of one write batch share it (the raw position of its first
  // record): they replay all or none. 0 for a record on its own.
  uint64_t batch = 0;
};

struct Recording {
  std::vector<RecordedEvent> events;  // in `end` order
  std::vector<Ack> acks;              // in seq order
  // release_before(position) calls, numbered when they began: records in
  // segments wholly before `position` may be gone from then on.
  std::vector<std::pair<uint64_t, Position>> releases;
  uint64_t next_seq = 0;              // every sequence number is below it
  bool direct_writes_durable = true;  // direct writes carried RWF_DSYNC
  uint32_t page_size = 4096;
  std::string config;  // Config::to_string() of the recorded log

  // A compact binary copy, so a failing state can be rebuilt exactly
  // (the recorded run itself depends on thread timing).
  bool save(const std::filesystem::path& path) const;
  static bool load(const std::filesystem::path& path, Recording* out);
};

class Recorder : public io::Hook {
 public:
  // Records only operations on `dir` and the files directly in it.
  // `sync_delay` > 0 sleeps a random 0..sync_delay in before() of every
  // operation that makes data durable (msync, fdatasync, fsync, direct
  // write, directory fsync), as FoundationDB's simulation adds latency: a library that
  // acknowledges before its sync completes then has acknowledgements
  // recorded inside that window, where a crash state can land.
  // `rename_sync_delay` > 0 also stretches the first directory fsync a
  // thread makes after a rename by that much: the window in which the
  // rename is done but not durable, and other threads go on.
  explicit Recorder(std::filesystem::path dir, bool direct_writes_durable = true,
                    std::chrono::microseconds sync_delay = {},
                    std::chrono::microseconds rename_sync_delay = {});

  int before(const io::Event& e) override;
  void after(const io::Event& e) override;
  // The test's acknowledgement: append() returned `position` for `bytes`.
  void ack(Position position, std::span<const std::byte> bytes);
  void ack(Position position, std::string_view bytes) {
    ack(position, std::as_bytes(std::span(bytes.data(), bytes.size())));
  }

  // The same for a whole write batch, acknowledged at one moment.
  void ack_batch(std::span<const Position> positions, std::span<const std::string> records);

  // Call just before Log::release_before(position).
  void release(Position position);

  // The recording so far (take it after uninstalling the hook).
  Recording take();

 private:
  // The thread is part of the key: two threads' concurrent fsyncs of the
  // directory look alike otherwise, and pairing one's end with the other's
  // start would misdate which renames a sync covered.
  using Key = std::tuple<io::Op, std::string, uint64_t, const std::byte*, std::thread::id>;
  bool name_in_dir(const std::filesystem::path& p, std::string* name) const;

  const std::string dir_;
  const std::chrono::microseconds sync_delay_;
  const std::chrono::microseconds rename_sync_delay_;
  std::mutex mu_;
  uint64_t delay_state_ = 0x2545f4914f6cdd1dull;
  uint64_t next_ = 0;
  std::map<Key, std::vector<uint64_t>> open_;  // before() numbers not yet matched by after()
  Recording rec_;
};

enum class Model { old_or_new, garbled };
const char* to_string(Model m);

// What ends the session at moment k. A power loss keeps only what was
// durable (plus the model's choices for the rest); a process crash keeps
// the page cache: every write and directory operation that had completed,
// and every mmap store (a page's contents as its next msync captured them),
// none of it durable yet. A later power loss can still take that away.
enum class Crash { power, process };
const char* to_string(Crash c);

// One file of a crash state as the next session finds it: under which name
// it is visible now and with which bytes, and what of it is durable (its
// name and its bytes). After a power loss both are the same.
struct StateFile {
  std::string durable_name;  // "" when no durable directory entry names it
  std::string visible_name;  // "" when it is gone from the directory (unlink not durable)
  std::vector<std::byte> durable;
  std::vector<std::byte> visible;
};

// A recording of a later session that starts from `base`: synthetic events
// first (each durable name and durable bytes written and synced, then the
// not-yet-durable renames, unlinks, creations and bytes), then `session`
// shifted past them. A crash in the session then decides afresh what of the
// earlier session's page cache survives, unless the session synced it.
Recording with_base(const std::vector<StateFile>& base, Recording session, uint64_t* shift);

struct Garbled {
  std::string name;
  uint64_t offset = 0;
  uint64_t length = 0;
};

struct CrashImage {
  uint64_t k = 0;
  std::map<std::string, std::vector<std::byte>> files;  // what the next open finds
  std::vector<StateFile> state;                         // the same, with what is durable
  std::vector<Garbled> garbled;
  // What the random choices had to work with, for the summary.
  uint64_t dirty_units = 0;  // unsynced sectors or pages that differ from their durable contents
  uint64_t new_units = 0;    // of those, taken NEW (or garbled)
  uint64_t uncertain_names = 0;  // directory operations not yet durable at k
  uint64_t names_applied = 0;    // of those, taken as done
  uint64_t uncertain_sizes = 0;  // files whose size change was not yet durable

  // Writes the files into `dir` (which must exist and be empty).
  bool write_to(const std::filesystem::path& dir, std::string* error) const;
  std::string describe() const;
};

class Simulator {
 public:
  explicit Simulator(const Recording& rec, uint32_t sector = 512);
  // The directory a crash at moment k may leave; `seed` drives every choice.
  CrashImage image(uint64_t k, Model model, uint64_t seed, Crash crash = Crash::power) const;
  uint64_t moments() const { return rec_.next_seq + 1; }

 private:
  struct NameOp {
    enum Kind { create, rename, remove } kind;
    uint64_t begin, end;
    std::string name, to;
    int inode;
  };
  const Recording& rec_;
  const uint32_t sector_;
  std::vector<int> inode_of_;  // per event; -1 for the directory
  int inodes_ = 0;
  std::vector<NameOp> names_;  // in `end` order
  // Directory fsyncs by completion, with the latest start among those so far.
  std::vector<std::pair<uint64_t, uint64_t>> dir_barrier_;
};

struct Verdict {
  bool ok = true;
  std::string problem;
  uint64_t replayed = 0;  // records replay returned
  uint64_t end = 0;       // replay ended before this append in log order
  uint64_t required = 0;  // G1 required it to end at or after this one
  bool torn_tail = false;
  size_t damage = 0;
};

// The records a log may hold, in log (Position) order, each with the moment
// from which G1 requires it: its acknowledgement (0: required from the
// start, UINT64_MAX: never by itself, only as part of the prefix before a
// required one).
using Replay = std::vector<std::pair<Position, std::string>>;

class Checker {
 public:
  explicit Checker(const Recording& rec);
  // For a chain of sessions: `order` is every record the log may hold;
  // `releases` every release_before (segments wholly before the position
  // may be gone from its moment on).
  Checker(std::vector<Ack> order, std::vector<std::pair<uint64_t, Position>> releases);
  // Opens `config.dir` (an image of `image`), replays, closes, checks.
  Verdict check(const CrashImage& image, const Config& config) const;
  // Checks what an open of a state of moment k replayed.
  Verdict verify(const Replay& got, uint64_t k, const RecoveryReport& rep) const;
  size_t appends() const { return order_.size(); }
  const std::vector<Ack>& order() const { return order_; }
  // The first segment that may not be gone at moment k.
  uint64_t floor_segment(uint64_t k) const;
  // Another log's file was put in place of `segment` on purpose: recovery
  // (in skip-damaged mode) may report it as another log's, and only that.
  void allow_foreign_segment(uint64_t segment) { foreign_.insert(segment); }

 private:
  std::vector<Ack> order_;  // by position: the log order
  std::vector<std::pair<uint64_t, Position>> releases_;
  std::set<uint64_t> foreign_;
  std::string order_error_;
};

// splitmix64: one seed per crash state from a base seed and an index.
uint64_t mix_seed(uint64_t base, uint64_t index);

// A sample of a recording's crash states, each opened with `config` (its
// dir replaced by the state's) and checked: state i has seed
// mix_seed(base, i) and moment seed % moments(), the garbled model on odd i
// and a process crash on every fifth. Stops after 3 failing states.
struct Sampled {
  std::vector<std::string> failures;  // one line per failing state
  int short_of_all = 0;               // states that replayed fewer records than acknowledged
  uint64_t required = 0;              // records G1 required, summed over the states
};
Sampled sample_states(const Recording& rec, const Config& config, int states, uint64_t base);

}  // namespace synclog::test::crash
