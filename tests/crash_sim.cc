#include "crash_sim.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "segments/format.h"
#include "segments/segment.h"
#include "test_util.h"

namespace synclog::test::crash {
namespace {

bool carries_data(io::Op op) {
  return op == io::Op::write || op == io::Op::direct_write || op == io::Op::msync;
}

std::string normal(const std::filesystem::path& p) {
  std::string s = p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

void put(std::vector<std::byte>& v, uint64_t offset, std::span<const std::byte> data) {
  if (data.empty()) return;
  if (v.size() < offset + data.size()) v.resize(offset + data.size());
  std::memcpy(v.data() + offset, data.data(), data.size());
}

// Bytes [from, to) of v, zero beyond its end.
std::vector<std::byte> slice(const std::vector<std::byte>& v, uint64_t from, uint64_t to) {
  std::vector<std::byte> out(to - from);
  if (from < v.size()) {
    const uint64_t n = std::min<uint64_t>(to, v.size()) - from;
    std::memcpy(out.data(), v.data() + from, n);
  }
  return out;
}

// Little binary writer and reader for Recording::save/load.
struct Out {
  std::ofstream f;
  void u64(uint64_t x) { f.write(reinterpret_cast<const char*>(&x), sizeof x); }
  void bytes(const void* p, size_t n) {
    u64(n);
    f.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
  }
  void str(const std::string& s) { bytes(s.data(), s.size()); }
};
struct In {
  std::ifstream f;
  uint64_t u64() {
    uint64_t x = 0;
    f.read(reinterpret_cast<char*>(&x), sizeof x);
    return x;
  }
  template <class C>
  void bytes(C* c) {
    const uint64_t n = u64();
    if (!f || n > (1ull << 32)) {
      f.setstate(std::ios::failbit);
      return;
    }
    c->resize(n);
    f.read(reinterpret_cast<char*>(c->data()), static_cast<std::streamsize>(n));
  }
};
// An mmap sync marker: a record of one Position and a time (format version 6).
constexpr uint64_t kMarkerBytes = seg::framed_size(seg::kMarkerPayload);

constexpr uint64_t kRecordingMagic = 0x32534d4953485243ull;  // "CRHSIMS2"

}  // namespace

uint64_t mix_seed(uint64_t base, uint64_t index) {
  uint64_t z = base + 0x9e3779b97f4a7c15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

Sampled sample_states(const Recording& rec, const Config& config, int states, uint64_t base) {
  const Simulator sim(rec);
  const Checker checker(rec);
  Sampled out;
  for (int i = 0; i < states && out.failures.size() < 3; ++i) {
    const uint64_t seed = mix_seed(base, static_cast<uint64_t>(i));
    const uint64_t k = seed % sim.moments();
    const Model model = i % 2 ? Model::garbled : Model::old_or_new;
    const Crash crash = i % 5 == 4 ? Crash::process : Crash::power;
    const CrashImage img = sim.image(k, model, seed, crash);
    TempDir state;
    std::string err;
    const std::string which = "state " + std::to_string(i) + " (k " + std::to_string(k) +
                              ", seed " + std::to_string(seed) + ", " + to_string(model) + ", " +
                              to_string(crash) + "): ";
    if (!img.write_to(state.path(), &err)) {
      out.failures.push_back(which + err);
      continue;
    }
    Config c = config;
    c.dir = state.path();
    const Verdict v = checker.check(img, c);
    out.short_of_all += v.replayed < rec.acks.size();
    out.required += v.required;
    if (!v.ok) out.failures.push_back(which + v.problem);
  }
  return out;
}

const char* to_string(Model m) { return m == Model::old_or_new ? "old-or-new" : "garbled"; }
const char* to_string(Crash c) { return c == Crash::power ? "power loss" : "process crash"; }

Recording with_base(const std::vector<StateFile>& base, Recording session, uint64_t* shift) {
  Recording out;
  uint64_t seq = 0;
  auto add = [&](io::Op op, const std::string& name, const std::vector<std::byte>* data,
                 const std::string& to = "") {
    RecordedEvent e;
    e.op = op;
    e.begin = e.end = seq++;
    e.name = name;
    e.to = to;
    if (data) {
      e.data = *data;
      e.length = data->size();
    }
    out.events.push_back(std::move(e));
  };
  // Durable: the names a directory fsync covers, the bytes an fdatasync does.
  for (const auto& f : base) {
    if (!f.durable_name.empty()) add(io::Op::write, f.durable_name, &f.durable);
  }
  add(io::Op::dir_sync, "", nullptr);
  for (const auto& f : base) {
    if (!f.durable_name.empty()) add(io::Op::datasync, f.durable_name, nullptr);
  }
  // Not yet durable: unlinks, then renames, then new names, then bytes.
  for (const auto& f : base) {
    if (!f.durable_name.empty() && f.visible_name.empty())
      add(io::Op::remove, f.durable_name, nullptr);
  }
  for (const auto& f : base) {
    if (!f.durable_name.empty() && !f.visible_name.empty() && f.visible_name != f.durable_name)
      add(io::Op::rename, f.durable_name, nullptr, f.visible_name);
  }
  for (const auto& f : base) {
    if (f.durable_name.empty() && !f.visible_name.empty()) {
      add(io::Op::write, f.visible_name, &f.durable);
      add(io::Op::datasync, f.visible_name, nullptr);
    }
  }
  for (const auto& f : base) {
    if (!f.visible_name.empty() && f.visible != f.durable)
      add(io::Op::write, f.visible_name, &f.visible);
  }
  *shift = seq;
  for (auto& e : session.events) {
    e.begin += seq;
    e.end += seq;
    out.events.push_back(std::move(e));
  }
  for (auto& a : session.acks) {
    if (a.seq != UINT64_MAX) a.seq += seq;  // UINT64_MAX: appended, never acknowledged
  }
  for (auto& r : session.releases) r.first += seq;
  out.acks = std::move(session.acks);
  out.releases = std::move(session.releases);
  out.next_seq = session.next_seq + seq;
  out.direct_writes_durable = session.direct_writes_durable;
  out.page_size = session.page_size;
  out.config = std::move(session.config);
  return out;
}

// ---------------------------------------------------------------- Recording

bool Recording::save(const std::filesystem::path& path) const {
  Out o{std::ofstream(path, std::ios::binary | std::ios::trunc)};
  o.u64(kRecordingMagic);
  o.u64(next_seq);
  o.u64(direct_writes_durable ? 1 : 0);
  o.u64(page_size);
  o.str(config);
  o.u64(events.size());
  for (const auto& e : events) {
    o.u64(static_cast<uint64_t>(e.op));
    o.u64(e.begin);
    o.u64(e.end);
    o.str(e.name);
    o.str(e.to);
    o.u64(e.offset);
    o.u64(e.length);
    o.bytes(e.data.data(), e.data.size());
  }
  o.u64(acks.size());
  for (const auto& a : acks) {
    o.u64(a.seq);
    o.u64(a.position.raw());
    o.str(a.bytes);
    o.u64(a.batch);
  }
  o.u64(releases.size());
  for (const auto& [seq, pos] : releases) {
    o.u64(seq);
    o.u64(pos.raw());
  }
  return static_cast<bool>(o.f);
}

bool Recording::load(const std::filesystem::path& path, Recording* out) {
  In in{std::ifstream(path, std::ios::binary)};
  Recording r;
  if (in.u64() != kRecordingMagic) return false;
  r.next_seq = in.u64();
  r.direct_writes_durable = in.u64() != 0;
  r.page_size = static_cast<uint32_t>(in.u64());
  in.bytes(&r.config);
  const uint64_t n = in.u64();
  for (uint64_t i = 0; i < n && in.f; ++i) {
    RecordedEvent e;
    e.op = static_cast<io::Op>(in.u64());
    e.begin = in.u64();
    e.end = in.u64();
    in.bytes(&e.name);
    in.bytes(&e.to);
    e.offset = in.u64();
    e.length = in.u64();
    in.bytes(&e.data);
    r.events.push_back(std::move(e));
  }
  const uint64_t m = in.u64();
  for (uint64_t i = 0; i < m && in.f; ++i) {
    Ack a;
    a.seq = in.u64();
    a.position = Position::from_raw(in.u64());
    in.bytes(&a.bytes);
    a.batch = in.u64();
    r.acks.push_back(std::move(a));
  }
  const uint64_t nr = in.u64();
  for (uint64_t i = 0; i < nr && in.f; ++i) {
    const uint64_t seq = in.u64();
    r.releases.emplace_back(seq, Position::from_raw(in.u64()));
  }
  if (!in.f) return false;
  *out = std::move(r);
  return true;
}

// ----------------------------------------------------------------- Recorder

Recorder::Recorder(std::filesystem::path dir, bool direct_writes_durable,
                   std::chrono::microseconds sync_delay,
                   std::chrono::microseconds rename_sync_delay)
    : dir_(normal(dir)), sync_delay_(sync_delay), rename_sync_delay_(rename_sync_delay) {
  rec_.direct_writes_durable = direct_writes_durable;
  rec_.page_size = static_cast<uint32_t>(::sysconf(_SC_PAGESIZE));
}

bool Recorder::name_in_dir(const std::filesystem::path& p, std::string* name) const {
  const std::string s = normal(p);
  if (s == dir_) {
    name->clear();
    return true;
  }
  if (s.size() > dir_.size() + 1 && s.compare(0, dir_.size(), dir_) == 0 && s[dir_.size()] == '/' &&
      s.find('/', dir_.size() + 1) == std::string::npos) {
    *name = s.substr(dir_.size() + 1);
    return true;
  }
  return false;
}

int Recorder::before(const io::Event& e) {
  std::string name;
  if (!name_in_dir(e.path, &name)) return 0;
  uint64_t delay_us = 0;
  {
    std::lock_guard lock(mu_);
    open_[Key{e.op, name, e.offset, e.data, std::this_thread::get_id()}].push_back(next_++);
    const bool syncs = e.op == io::Op::msync || e.op == io::Op::datasync || e.op == io::Op::fsync ||
                       e.op == io::Op::direct_write || e.op == io::Op::dir_sync;
    if (syncs && sync_delay_.count() > 0) {
      delay_state_ = mix_seed(delay_state_, next_);
      delay_us = delay_state_ % static_cast<uint64_t>(sync_delay_.count() + 1);
    }
  }
  if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
  if (rename_sync_delay_.count() > 0) {
    static thread_local bool renamed = false;
    if (e.op == io::Op::rename) renamed = true;
    if (e.op == io::Op::dir_sync && renamed) {
      renamed = false;
      std::this_thread::sleep_for(rename_sync_delay_);
    }
  }
  return 0;
}

void Recorder::after(const io::Event& e) {
  RecordedEvent r;
  if (!name_in_dir(e.path, &r.name)) return;
  r.op = e.op;
  r.offset = e.offset;
  r.length = e.length;
  if (e.op == io::Op::rename && (e.to == nullptr || !name_in_dir(*e.to, &r.to))) {
    r.to = "<outside the directory>";
  }
  if (carries_data(e.op) && e.data != nullptr) r.data.assign(e.data, e.data + e.length);
  std::lock_guard lock(mu_);
  r.end = next_++;
  r.begin = r.end;
  auto it = open_.find(Key{e.op, r.name, e.offset, e.data, std::this_thread::get_id()});
  if (it != open_.end()) {
    r.begin = it->second.front();
    it->second.erase(it->second.begin());
    if (it->second.empty()) open_.erase(it);
  }
  rec_.events.push_back(std::move(r));
}

void Recorder::ack(Position position, std::span<const std::byte> bytes) {
  Ack a;
  a.position = position;
  a.bytes.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  std::lock_guard lock(mu_);
  a.seq = next_++;
  rec_.acks.push_back(std::move(a));
}

void Recorder::ack_batch(std::span<const Position> positions,
                         std::span<const std::string> records) {
  std::lock_guard lock(mu_);
  const uint64_t seq = next_++;
  for (size_t i = 0; i < positions.size(); ++i) {
    rec_.acks.push_back(Ack{seq, positions[i], records[i], positions.front().raw()});
  }
}

void Recorder::release(Position position) {
  std::lock_guard lock(mu_);
  rec_.releases.emplace_back(next_++, position);
}

Recording Recorder::take() {
  std::lock_guard lock(mu_);
  rec_.next_seq = next_;
  Recording out = std::move(rec_);
  rec_ = Recording{};
  rec_.direct_writes_durable = out.direct_writes_durable;
  rec_.page_size = out.page_size;
  open_.clear();
  return out;
}

// ---------------------------------------------------------------- Simulator

Simulator::Simulator(const Recording& rec, uint32_t sector) : rec_(rec), sector_(sector) {
  std::map<std::string, int> live;
  inode_of_.assign(rec.events.size(), -1);
  uint64_t barrier = 0;
  for (size_t j = 0; j < rec.events.size(); ++j) {
    const RecordedEvent& e = rec.events[j];
    auto inode_for = [&](const std::string& name) {
      auto it = live.find(name);
      if (it != live.end()) return it->second;
      // A file first seen here was created (opened) before this operation began.
      const int ino = inodes_++;
      live[name] = ino;
      names_.push_back(NameOp{NameOp::create, e.begin, e.end, name, "", ino});
      return ino;
    };
    switch (e.op) {
      case io::Op::dir_sync:
        barrier = std::max(barrier, e.begin);
        dir_barrier_.emplace_back(e.end, barrier);
        break;
      case io::Op::rename: {
        const int ino = inode_for(e.name);
        inode_of_[j] = ino;
        names_.push_back(NameOp{NameOp::rename, e.begin, e.end, e.name, e.to, ino});
        live.erase(e.name);
        live[e.to] = ino;
        break;
      }
      case io::Op::remove: {
        const int ino = inode_for(e.name);
        inode_of_[j] = ino;
        names_.push_back(NameOp{NameOp::remove, e.begin, e.end, e.name, "", ino});
        live.erase(e.name);
        break;
      }
      default:
        inode_of_[j] = inode_for(e.name);
        break;
    }
  }
}

CrashImage Simulator::image(uint64_t k, Model model, uint64_t seed, Crash crash) const {
  std::mt19937_64 rng(seed);
  CrashImage img;
  img.k = k;
  const auto& ev = rec_.events;
  const uint64_t page = rec_.page_size;

  struct FileState {
    std::vector<std::byte> stable, latest;
    uint64_t stable_size = 0, latest_size = 0;
    std::vector<size_t> pending;         // writes not known durable
    std::vector<size_t> pending_alloc;   // size changes not known durable
    std::map<uint64_t, size_t> capture;  // page -> its next msync at or after k
    bool ended = false;                  // no more look-ahead (renamed, removed, rewritten)
  };
  std::vector<FileState> fs(static_cast<size_t>(inodes_));
  auto write_latest = [&](FileState& f, const RecordedEvent& e) {
    put(f.latest, e.offset, e.data);
    f.latest_size = std::max(f.latest_size, e.offset + e.data.size());
  };
  auto write_stable = [&](FileState& f, const RecordedEvent& e) {
    put(f.stable, e.offset, e.data);
    f.stable_size = std::max(f.stable_size, e.offset + e.data.size());
  };

  // Everything that completed before k.
  size_t j = 0;
  for (; j < ev.size() && ev[j].end < k; ++j) {
    const RecordedEvent& e = ev[j];
    if (inode_of_[j] < 0) continue;
    FileState& f = fs[static_cast<size_t>(inode_of_[j])];
    switch (e.op) {
      case io::Op::write:
      case io::Op::direct_write:
        write_latest(f, e);
        if (e.op == io::Op::direct_write && rec_.direct_writes_durable) {
          write_stable(f, e);
        } else {
          f.pending.push_back(j);
        }
        break;
      case io::Op::allocate:
        f.latest_size = std::max(f.latest_size, e.length);
        f.pending_alloc.push_back(j);
        break;
      case io::Op::datasync:
      case io::Op::fsync: {
        // Covers what had completed before it started.
        std::erase_if(f.pending, [&](size_t w) {
          if (ev[w].end >= e.begin) return false;
          write_stable(f, ev[w]);
          return true;
        });
        std::erase_if(f.pending_alloc, [&](size_t a) {
          if (ev[a].end >= e.begin) return false;
          f.stable_size = std::max(f.stable_size, ev[a].length);
          return true;
        });
        break;
      }
      case io::Op::msync:
        put(f.stable, e.offset, e.data);
        put(f.latest, e.offset, e.data);
        break;
      default:
        break;
    }
  }
  // In flight at k, and the look-ahead for mmap pages.
  for (size_t i = j; i < ev.size(); ++i) {
    const RecordedEvent& e = ev[i];
    if (inode_of_[i] < 0) continue;
    FileState& f = fs[static_cast<size_t>(inode_of_[i])];
    const bool started = e.begin < k;
    switch (e.op) {
      case io::Op::write:
      case io::Op::direct_write:
        if (started) {
          write_latest(f, e);
          f.pending.push_back(i);
        } else {
          f.ended = true;
        }
        break;
      case io::Op::allocate:
        if (started) {
          f.latest_size = std::max(f.latest_size, e.length);
          f.pending_alloc.push_back(i);
        } else {
          f.ended = true;
        }
        break;
      case io::Op::rename:
      case io::Op::remove:
        f.ended = true;
        break;
      case io::Op::msync:
        if (!f.ended && e.length > 0) {
          for (uint64_t p = e.offset / page; p * page < e.offset + e.length; ++p) {
            f.capture.try_emplace(p, i);
          }
        }
        break;
      default:
        break;
    }
  }

  // The directory.
  uint64_t barrier = 0;
  {
    auto it = std::lower_bound(dir_barrier_.begin(), dir_barrier_.end(), k,
                               [](const auto& d, uint64_t key) { return d.first < key; });
    if (it != dir_barrier_.begin()) barrier = std::prev(it)->second;
  }
  // `dir` is what the next open finds; `durable_dir` what a later power
  // loss keeps of it (the same after a power loss).
  std::map<std::string, int> dir, durable_dir;
  auto apply = [](std::map<std::string, int>& d, const NameOp& op) {
    switch (op.kind) {
      case NameOp::create:
        d[op.name] = op.inode;
        break;
      case NameOp::rename: {
        auto it = d.find(op.name);
        if (it == d.end() || it->second != op.inode) break;
        d.erase(it);
        d[op.to] = op.inode;
        break;
      }
      case NameOp::remove: {
        auto it = d.find(op.name);
        if (it != d.end() && it->second == op.inode) d.erase(it);
        break;
      }
    }
  };
  for (const NameOp& op : names_) {
    if (op.begin >= k) continue;
    const bool durable = op.end < barrier;
    if (durable) apply(durable_dir, op);
    // After a process crash every completed operation is in the directory;
    // after a power loss only the durable ones surely are.
    const bool certain = crash == Crash::power ? durable : op.end < k;
    if (!certain) {
      ++img.uncertain_names;
      if ((rng() & 1) == 0) continue;
      ++img.names_applied;
    }
    apply(dir, op);
  }
  if (crash == Crash::power) durable_dir = dir;

  // File contents, for the files that are there. Garbage follows SQLite's
  // POWERSAFE_OVERWRITE: an interrupted write can scramble the bytes it was
  // changing (here the span from the first to the last changed byte of a
  // sector), never the bytes around them that it rewrote unchanged.
  auto garble = [&](std::vector<std::byte>& out, const std::string& name, uint64_t from,
                    const std::byte* old_bytes, const std::byte* new_bytes, uint64_t n) {
    uint64_t lo = 0, hi = n;
    while (lo < n && old_bytes[lo] == new_bytes[lo]) ++lo;
    while (hi > lo && old_bytes[hi - 1] == new_bytes[hi - 1]) --hi;
    std::memcpy(out.data() + from, new_bytes, n);
    if (lo == hi) return;
    for (uint64_t x = lo; x < hi; ++x) out[from + x] = static_cast<std::byte>(rng());
    img.garbled.push_back(Garbled{name, from + lo, hi - lo});
  };
  std::map<int, StateFile> state;
  for (const auto& [name, ino] : durable_dir) state[ino].durable_name = name;
  for (const auto& [name, ino] : dir) state[ino].visible_name = name;
  for (auto& [ino, sf] : state) {
    FileState& f = fs[static_cast<size_t>(ino)];
    if (crash == Crash::process) sf.durable = slice(f.stable, 0, f.stable_size);
  }
  for (const auto& [name, ino] : dir) {
    FileState& f = fs[static_cast<size_t>(ino)];
    if (crash == Crash::process) {
      // The page cache: everything written, every mmap store; nothing torn.
      std::vector<std::byte> out =
          slice(f.latest, 0, std::max<uint64_t>(f.latest_size, f.latest.size()));
      for (const auto& [p, i] : f.capture) {
        const RecordedEvent& e = ev[i];
        const uint64_t lo = std::max(p * page, e.offset);
        const uint64_t hi = std::min((p + 1) * page, e.offset + e.data.size());
        if (lo >= hi) continue;
        if (out.size() < hi) out.resize(hi);
        uint64_t keep_from = hi;
        if (e.begin >= k) {
          const uint64_t range_end = e.offset + e.data.size();
          keep_from = std::max(lo, range_end >= kMarkerBytes ? range_end - kMarkerBytes : 0);
        }
        const uint64_t upto = std::min(hi, keep_from);
        if (upto > lo) {
          if (std::memcmp(out.data() + lo, e.data.data() + (lo - e.offset), upto - lo) != 0)
            ++img.dirty_units;
          std::memcpy(out.data() + lo, e.data.data() + (lo - e.offset), upto - lo);
        }
      }
      out.resize(std::max<uint64_t>(f.latest_size, f.stable_size));
      if (out != slice(f.stable, 0, f.stable_size)) ++img.new_units;
      state[ino].visible = out;
      img.files[name] = std::move(out);
      continue;
    }
    uint64_t size = f.stable_size;
    if (f.latest_size != f.stable_size) {
      ++img.uncertain_sizes;
      if (rng() & 1) size = f.latest_size;
    }
    const uint64_t extent = std::max(
        {size, f.stable_size, f.latest_size, uint64_t{f.stable.size()}, uint64_t{f.latest.size()}});
    std::vector<std::byte> out = slice(f.stable, 0, extent);
    // Unsynced sectors written by write/direct_write.
    std::set<uint64_t> sectors;
    for (size_t w : f.pending) {
      const RecordedEvent& e = ev[w];
      if (e.data.empty()) continue;
      for (uint64_t s = e.offset / sector_; s * sector_ < e.offset + e.data.size(); ++s)
        sectors.insert(s);
    }
    for (uint64_t s : sectors) {
      const uint64_t from = s * sector_;
      const uint64_t to = std::min<uint64_t>(from + sector_, extent);
      if (from >= to) continue;
      const auto old_bytes = slice(f.stable, from, to);
      const auto new_bytes = slice(f.latest, from, to);
      if (old_bytes == new_bytes) continue;
      ++img.dirty_units;
      const uint64_t pick = model == Model::old_or_new ? rng() % 2 : rng() % 3;
      if (pick == 0) continue;
      ++img.new_units;
      if (pick == 1) {
        std::memcpy(out.data() + from, new_bytes.data(), new_bytes.size());
      } else {
        garble(out, name, from, old_bytes.data(), new_bytes.data(), to - from);
      }
    }
    // Unsynced mmap pages: NEW is what the page's next msync captured.
    for (const auto& [p, i] : f.capture) {
      const RecordedEvent& e = ev[i];
      const uint64_t lo = std::max(p * page, e.offset);
      const uint64_t hi = std::min({(p + 1) * page, e.offset + e.data.size(), extent});
      if (lo >= hi) continue;
      // What the page held at k: the capture, except the sync marker at the
      // end of an msync that started after k (the driver stores it just
      // before it msyncs; it would claim durability that k did not have).
      std::vector<std::byte> cap_bytes(e.data.begin() + static_cast<ptrdiff_t>(lo - e.offset),
                                       e.data.begin() + static_cast<ptrdiff_t>(hi - e.offset));
      if (e.begin >= k) {
        const uint64_t range_end = e.offset + e.data.size();
        const uint64_t marker = range_end >= kMarkerBytes ? range_end - kMarkerBytes : 0;
        for (uint64_t x = std::max(lo, marker); x < hi; ++x) cap_bytes[x - lo] = out[x];
      }
      const std::byte* cap = cap_bytes.data();
      if (std::memcmp(out.data() + lo, cap, hi - lo) == 0) continue;
      ++img.dirty_units;
      const uint64_t pick = model == Model::old_or_new ? rng() % 2 : rng() % 3;
      if (pick == 0) continue;
      ++img.new_units;
      if (pick == 1) {
        std::memcpy(out.data() + lo, cap, hi - lo);
        continue;
      }
      // A torn page: each sector old, new or garbage.
      const auto old_page = slice(out, lo, hi);
      for (uint64_t from = lo; from < hi;) {
        const uint64_t to = std::min(hi, (from / sector_ + 1) * sector_);
        const uint64_t s = rng() % 3;
        if (s == 1) std::memcpy(out.data() + from, cap + (from - lo), to - from);
        if (s == 2)
          garble(out, name, from, old_page.data() + (from - lo), cap + (from - lo), to - from);
        from = to;
      }
    }
    out.resize(size);
    state[ino].durable = out;
    state[ino].visible = out;
    img.files[name] = std::move(out);
  }
  for (auto& [ino, sf] : state) img.state.push_back(std::move(sf));
  return img;
}

bool CrashImage::write_to(const std::filesystem::path& dir, std::string* error) const {
  for (const auto& [name, bytes] : files) {
    const auto path = dir / name;
    int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      *error = "create " + path.string() + ": " + std::strerror(errno);
      return false;
    }
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        *error = "write " + path.string() + ": " + std::strerror(errno);
        ::close(fd);
        return false;
      }
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  return true;
}

std::string CrashImage::describe() const {
  std::ostringstream s;
  s << "crash image at k=" << k << ": files";
  for (const auto& [name, bytes] : files) s << " " << name << "(" << bytes.size() << ")";
  s << "; unsynced units " << dirty_units << " (" << new_units << " new/garbled), garbled ranges "
    << garbled.size() << ", undurable directory ops " << uncertain_names << " (" << names_applied
    << " applied), undurable sizes " << uncertain_sizes;
  return s.str();
}

// ------------------------------------------------------------------ Checker

Checker::Checker(const Recording& rec) : Checker(rec.acks, rec.releases) {}

Checker::Checker(std::vector<Ack> order, std::vector<std::pair<uint64_t, Position>> releases)
    : order_(std::move(order)), releases_(std::move(releases)) {
  std::stable_sort(order_.begin(), order_.end(),
                   [](const Ack& a, const Ack& b) { return a.position < b.position; });
  for (size_t i = 1; i < order_.size(); ++i) {
    if (order_[i].position == order_[i - 1].position) {
      order_error_ = "two appends were acknowledged at position " + order_[i].position.to_string();
    }
  }
}

uint64_t Checker::floor_segment(uint64_t k) const {
  uint64_t floor = 0;
  for (const auto& [seq, pos] : releases_) {
    if (seq < k) floor = std::max(floor, pos.segment());
  }
  return floor;
}

Verdict Checker::check(const CrashImage& image, const Config& config) const {
  Verdict v;
  auto log = Log::open(config);
  if (!log) {
    v.ok = false;
    v.problem = "Log::open failed: " + log.error().describe();
    return v;
  }
  Replay got;
  std::string read_error;
  {
    auto reader = (*log)->read();
    if (!reader) {
      read_error = "read() failed: " + reader.error().describe();
    } else {
      for (;;) {
        auto rec = reader->next();
        if (!rec) {
          read_error = "replay failed after " + std::to_string(got.size()) +
                       " records: " + rec.error().describe();
          break;
        }
        if (!*rec) break;
        got.emplace_back(
            (*rec)->position,
            std::string(reinterpret_cast<const char*>((*rec)->data.data()), (*rec)->data.size()));
      }
    }
  }
  const RecoveryReport rep = (*log)->recovery();
  auto closed = (*log)->close();
  log->reset();
  v = verify(got, image.k, rep);
  auto fail = [&](const std::string& why) {
    v.ok = false;
    v.problem = why + (v.problem.empty() ? "" : "; " + v.problem);
  };
  if (!read_error.empty()) fail(read_error);
  if (!closed) fail("close after replay failed: " + closed.error().describe());
  return v;
}

Verdict Checker::verify(const Replay& got, uint64_t k, const RecoveryReport& rep) const {
  Verdict v;
  auto fail = [&](const std::string& why) {
    v.ok = false;
    if (!v.problem.empty()) v.problem += "; ";
    v.problem += why;
    return v;
  };
  if (!order_error_.empty()) return fail(order_error_);

  // Segments wholly before the floor had been handed to release_before by k:
  // their records may be gone, and replay may start at any later segment.
  const uint64_t floor = floor_segment(k);
  // G1: the log-order run that must be there: from the first record at or
  // past the floor to the last one required at k (garbage only ever
  // replaces bytes being changed, and acknowledged bytes never change).
  size_t first_required = 0;
  while (first_required < order_.size() && order_[first_required].position.segment() < floor) {
    ++first_required;
  }
  for (size_t i = first_required; i < order_.size(); ++i) {
    if (order_[i].seq < k) v.required = std::max<uint64_t>(v.required, i + 1);
  }
  v.torn_tail = rep.torn_tail;
  v.damage = rep.damage.size();
  std::ostringstream report;
  report << "recovery: end " << rep.end.to_string() << ", " << rep.records << " records, "
         << rep.segments << " segments, torn_tail " << rep.torn_tail;
  for (const Damage& d : rep.damage)
    report << ", damage at " << d.at.to_string() << ": " << d.reason;

  // Durable bytes never change in these models, so recovery has nothing to
  // call damage: a gap before a position a marker proves durable, or a
  // missing segment, means durable data was lost. The one exception is a
  // file the test itself replaced by another log's.
  const auto foreign = [&](const Damage& d) {
    return foreign_.count(d.at.segment()) != 0 && d.at.offset() == 0 &&
           d.reason.find("another log") != std::string::npos;
  };
  if (!std::all_of(rep.damage.begin(), rep.damage.end(), foreign))
    fail("recovery reported damage in a valid crash state");
  v.replayed = got.size();

  // G2 and G3: exactly records a..a+n-1 in log order, byte for byte, where
  // a is 0 or lies past released segments only (no releases: a = 0, a prefix).
  size_t start = 0;
  if (!got.empty()) {
    auto it = std::lower_bound(order_.begin(), order_.end(), got[0].first,
                               [](const Ack& a, Position p) { return a.position < p; });
    start = static_cast<size_t>(it - order_.begin());
    if (start > first_required) {
      return fail("G2: replay starts at " + got[0].first.to_string() + ", skipping record " +
                  std::to_string(first_required) + " at " +
                  order_[first_required].position.to_string() + " which was not released (" +
                  report.str() + ")");
    }
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const size_t want_index = start + i;
    if (want_index >= order_.size()) {
      return fail("phantom record " + std::to_string(i) + " at " + got[i].first.to_string() +
                  ": only " + std::to_string(order_.size()) + " records were appended (" +
                  report.str() + ")");
    }
    const Ack& want = order_[want_index];
    if (got[i].first != want.position) {
      return fail("G2: replayed record " + std::to_string(i) + " is at " +
                  got[i].first.to_string() + " but record " + std::to_string(want_index) +
                  " in log order is at " + want.position.to_string() +
                  " (a hole, reordering or phantom; " + report.str() + ")");
    }
    if (got[i].second != want.bytes) {
      return fail("G3: replayed record " + std::to_string(i) + " at " + got[i].first.to_string() +
                  " differs from what was appended (" + std::to_string(got[i].second.size()) +
                  " bytes, appended " + std::to_string(want.bytes.size()) + "; " + report.str() +
                  ")");
    }
  }
  const size_t end = start + got.size();
  v.end = end;
  // A write batch is one record under one checksum: all or none.
  const auto splits = [&](size_t i) {
    return i > 0 && i < order_.size() && order_[i].batch != 0 &&
           order_[i].batch == order_[i - 1].batch;
  };
  if (!got.empty() && (splits(start) || splits(end))) {
    const size_t at = splits(start) ? start : end;
    return fail("partial batch: replay " + std::string(at == start ? "starts" : "ends") +
                " inside the write batch at " + Position::from_raw(order_[at].batch).to_string() +
                ", before its record at " + order_[at].position.to_string() + " (" + report.str() +
                ")");
  }
  if (end < v.required) {
    const Ack& missing = order_[std::max(end, first_required)];
    return fail("G1: replay returned records " + std::to_string(start) + ".." +
                std::to_string(end) + " but " + std::to_string(v.required) +
                " were required at the crash; the first missing is at " +
                missing.position.to_string() + " (acked at seq " + std::to_string(missing.seq) +
                "; " + report.str() + ")");
  }
  if (!v.ok) v.problem += " (" + report.str() + ")";
  return v;
}

}  // namespace synclog::test::crash
