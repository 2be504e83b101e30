#include "kvstore.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

namespace kv {
namespace {

using synclog::Errc;
using synclog::make_error;
using synclog::Result;

// A log record: op ('P' put, 'D' del), key length (u32, little-endian), key,
// then the value (put only; the rest of the record).
std::string encode(char op, std::string_view key, std::string_view value) {
  const auto n = static_cast<uint32_t>(key.size());
  std::string r(1, op);
  r.append(reinterpret_cast<const char*>(&n), sizeof n);
  r.append(key);
  r.append(value);
  return r;
}

// Snapshot file: "kvsnap1\n", the replay position (u64), then for each entry
// key length (u32), value length (u32), key, value.
constexpr std::string_view kSnapMagic = "kvsnap1\n";

void put_u32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); }

bool take(std::string_view& in, void* out, size_t n) {
  if (in.size() < n) return false;
  std::memcpy(out, in.data(), n);
  in.remove_prefix(n);
  return true;
}

std::unexpected<synclog::Error> sys(const std::string& what, const std::filesystem::path& p) {
  return make_error(Errc::io_error, what + " " + p.string() + ": " + std::strerror(errno), errno);
}

// Writes `bytes` to `path` so that a crash leaves either the old file or the
// new one, complete: write a temp file, fsync it, rename it over, fsync the dir.
Result<void> write_file_atomically(const std::filesystem::path& path, std::string_view bytes) {
  const auto tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return sys("create", tmp);
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      auto err = sys("write", tmp);
      ::close(fd);
      return err;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    auto err = sys("fsync", tmp);
    ::close(fd);
    return err;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return sys("rename", tmp);
  const int dfd = ::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return sys("open", path.parent_path());
  const int rc = ::fsync(dfd);
  ::close(dfd);
  if (rc != 0) return sys("fsync", path.parent_path());
  return {};
}

}  // namespace

Result<std::unique_ptr<KvStore>> KvStore::open(const std::filesystem::path& dir,
                                               synclog::Config config) {
  std::error_code ec;
  std::filesystem::create_directories(dir / "log", ec);
  if (ec)
    return make_error(Errc::io_error, "create " + (dir / "log").string() + ": " + ec.message());
  // A snapshot.tmp is a checkpoint that crashed before its rename: ignore it.
  std::filesystem::remove(dir / "snapshot.tmp", ec);

  config.dir = dir / "log";
  config.mode = synclog::SyncMode::batch;  // append() returns once durable
  auto log = synclog::Log::open(config);
  if (!log) return std::unexpected(log.error());
  std::unique_ptr<KvStore> store(new KvStore(dir, std::move(*log)));
  if (auto r = store->load_snapshot(); !r) return std::unexpected(r.error());
  if (auto r = store->replay(); !r) return std::unexpected(r.error());
  return store;
}

Result<void> KvStore::load_snapshot() {
  std::ifstream in(dir_ / "snapshot", std::ios::binary);
  if (!in) return {};  // no checkpoint yet
  const std::string file{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::string_view s = file;
  auto bad = [&] {
    return make_error(Errc::corruption, (dir_ / "snapshot").string() + ": malformed");
  };
  if (!s.starts_with(kSnapMagic)) return bad();
  s.remove_prefix(kSnapMagic.size());
  uint64_t raw = 0;
  if (!take(s, &raw, sizeof raw)) return bad();
  next_ = synclog::Position::from_raw(raw);
  while (!s.empty()) {
    uint32_t klen = 0, vlen = 0;
    if (!take(s, &klen, 4) || !take(s, &vlen, 4) || s.size() < uint64_t{klen} + vlen) return bad();
    map_.emplace(std::string(s.substr(0, klen)), std::string(s.substr(klen, vlen)));
    s.remove_prefix(uint64_t{klen} + vlen);
  }
  return {};
}

Result<void> KvStore::replay() {
  auto reader = log_->read(next_);
  if (!reader) return std::unexpected(reader.error());
  for (;;) {
    auto rec = reader->next();
    if (!rec) return std::unexpected(rec.error());
    if (!*rec) return {};
    const auto& data = (*rec)->data;
    if (!apply(std::string_view(reinterpret_cast<const char*>(data.data()), data.size()))) {
      return make_error(Errc::corruption,
                        "undecodable kv record at " + (*rec)->position.to_string());
    }
    next_ = synclog::Position::from_raw((*rec)->position.raw() + 1);
  }
}

bool KvStore::apply(std::string_view r) {
  char op = 0;
  uint32_t klen = 0;
  if (!take(r, &op, 1) || !take(r, &klen, 4) || r.size() < klen) return false;
  std::string key(r.substr(0, klen));
  if (op == 'P') {
    map_.insert_or_assign(std::move(key), std::string(r.substr(klen)));
  } else if (op == 'D' && r.size() == klen) {
    map_.erase(key);
  } else {
    return false;
  }
  return true;
}

Result<void> KvStore::append(char op, std::string_view key, std::string_view value) {
  if (key.empty()) return make_error(Errc::invalid_argument, "empty key");
  const std::string record = encode(op, key, value);
  auto at = log_->append(record);  // batch mode: durable when it returns
  if (!at) return std::unexpected(at.error());
  apply(record);
  next_ = synclog::Position::from_raw(at->raw() + 1);
  return {};
}

Result<void> KvStore::put(std::string_view key, std::string_view value) {
  return append('P', key, value);
}

Result<void> KvStore::del(std::string_view key) { return append('D', key, {}); }

Result<void> KvStore::put_many(std::span<const KeyValue> pairs) {
  if (pairs.empty()) return {};
  std::vector<std::string> records;
  records.reserve(pairs.size());
  for (const auto& [key, value] : pairs) {
    if (key.empty()) return make_error(Errc::invalid_argument, "empty key");
    records.push_back(encode('P', key, value));
  }
  // Each pair stays an ordinary record, so replay() needs no batch format
  // of its own: the log recovers a batch's records all or none.
  const std::vector<std::string_view> views(records.begin(), records.end());
  auto at = log_->append_batch(views);  // batch mode: durable when it returns
  if (!at) return std::unexpected(at.error());
  for (const auto& r : records) apply(r);
  next_ = synclog::Position::from_raw(at->back().raw() + 1);
  return {};
}

std::optional<std::string> KvStore::get(std::string_view key) const {
  auto it = map_.find(key);
  if (it == map_.end()) return std::nullopt;
  return it->second;
}

Result<void> KvStore::checkpoint() {
  // The snapshot holds every change up to next_; replay will start there.
  std::string out(kSnapMagic);
  const uint64_t raw = next_.raw();
  out.append(reinterpret_cast<const char*>(&raw), sizeof raw);
  for (const auto& [k, v] : map_) {
    put_u32(out, static_cast<uint32_t>(k.size()));
    put_u32(out, static_cast<uint32_t>(v.size()));
    out += k;
    out += v;
  }
  if (auto r = write_file_atomically(dir_ / "snapshot", out); !r) return r;
  // Only now is the log before next_ redundant. A crash before this line is
  // harmless: replay from next_ skips the old segments anyway.
  auto released = log_->release_before(next_);
  if (!released) return std::unexpected(released.error());
  return {};
}

}  // namespace kv
