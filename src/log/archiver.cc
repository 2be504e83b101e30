#include "log/archiver.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "io/command.h"
#include "io/file.h"
#include "log/archive_state.h"
#include "segments/segment.h"

namespace synclog {
namespace {
// Nothing tells the archiver when durable() passes a segment switch: it
// looks this often. A segment takes far longer to fill than this.
constexpr auto kPollInterval = std::chrono::milliseconds(20);
constexpr auto kFirstBackoff = std::chrono::milliseconds(100);
constexpr auto kMaxBackoff = std::chrono::milliseconds(10'000);
constexpr size_t kCopyChunk = size_t{1} << 20;

// archive_dir: the copy is durable before it has the segment's name, and
// the name is durable before the caller records the segment archived. A
// temp file a crash left is overwritten and cut to size.
Result<void> durable_copy(const std::filesystem::path& from, const std::filesystem::path& dir,
                          uint32_t perms) {
  const auto name = from.filename();
  const auto tmp = dir / (name.string() + ".tmp");
  auto in = io::File::open(from, io::File::Mode::read);
  if (!in) return std::unexpected(in.error());
  auto out = io::File::open(tmp, io::File::Mode::create_or_open, perms);
  if (!out) return std::unexpected(out.error());
  std::vector<std::byte> buf(kCopyChunk);
  uint64_t off = 0;
  for (;;) {
    auto n = in->read_at(off, buf);
    if (!n) return std::unexpected(n.error());
    if (auto w = out->write_at(off, std::span(buf).first(*n)); !w) return w;
    off += *n;
    if (*n < kCopyChunk) break;
  }
  if (auto r = out->truncate(off); !r) return r;
  if (auto r = out->datasync(); !r) return r;
  out->close();
  if (auto r = io::rename_file(tmp, dir / name); !r) return r;
  return io::sync_dir(dir);
}

}  // namespace

std::string expand_archive_command(const std::string& command, const std::filesystem::path& path) {
  std::string out;
  for (size_t i = 0; i < command.size(); ++i) {
    if (command[i] != '%' || i + 1 == command.size()) {
      out += command[i];
      continue;
    }
    const char c = command[++i];
    if (c == 'p') {
      out += path.string();
    } else if (c == 'f') {
      out += path.filename().string();
    } else {
      out += c;
    }
  }
  return out;
}

Archiver::Archiver(ArchiverOptions options, const seg::SegmentManager& manager,
                   const sync::Driver& driver)
    : opt_(std::move(options)), manager_(manager), driver_(driver), through_(opt_.through) {}

Archiver::~Archiver() { stop(); }

void Archiver::start() {
  thread_ = std::thread([this] { run(); });
}

void Archiver::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Archiver::archivable(uint64_t id) const {
  return id > archived_through() && (id < opt_.first_new_id || id < driver_.durable().segment());
}

uint64_t Archiver::next_candidate() const {
  for (uint64_t id : manager_.segment_ids()) {
    if (id <= archived_through()) continue;
    return archivable(id) ? id : 0;
  }
  return 0;
}

Result<void> Archiver::archive(uint64_t id) {
  const auto path = opt_.dir / seg::segment_file_name(id);
  if (!opt_.copy_dir.empty()) {
    if (auto r = durable_copy(path, opt_.copy_dir, opt_.file_perms); !r) {
      return make_error(r.error().code,
                        "archive_dir: copying segment " + std::to_string(id) + " into " +
                            opt_.copy_dir.string() + " failed: " + r.error().message,
                        r.error().sys_errno);
    }
  } else if (opt_.hook) {
    if (auto r = opt_.hook(path, id); !r) {
      return make_error(
          r.error().code,
          "archive hook for segment " + std::to_string(id) + " failed: " + r.error().message,
          r.error().sys_errno);
    }
  } else {
    const std::string cmd = expand_archive_command(opt_.command, path);
    auto ran = io::run_shell(cmd);
    if (!ran) return std::unexpected(ran.error());
    if (!ran->ok()) {
      return make_error(Errc::io_error, "archive_command for segment " + std::to_string(id) + " (" +
                                            cmd + ") failed: " + ran->describe());
    }
  }
  // Recorded only after success: a crash in between archives it again.
  return store_archive_state(opt_.dir, ArchiveState{opt_.log_id, id}, opt_.file_perms);
}

void Archiver::run() {
  auto backoff = kFirstBackoff;
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    const uint64_t id = next_candidate();
    Result<void> r;
    if (id != 0) r = archive(id);
    lock.lock();
    if (id == 0) {
      wake_.wait_for(lock, kPollInterval, [&] { return stopping_; });
      continue;
    }
    if (r) {
      through_.store(id, std::memory_order_release);
      ++archived_;
      last_error_.clear();
      backoff = kFirstBackoff;
      continue;
    }
    ++failures_;
    last_error_ = r.error().describe();
    wake_.wait_for(lock, backoff, [&] { return stopping_; });
    backoff = std::min<std::chrono::milliseconds>(backoff * 2, kMaxBackoff);
  }
}

ArchiverStats Archiver::stats() const {
  ArchiverStats s;
  for (uint64_t id : manager_.segment_ids()) {
    if (archivable(id)) ++s.pending;
  }
  std::lock_guard lock(mu_);
  s.archived = archived_;
  s.failures = failures_;
  s.last_error = last_error_;
  return s;
}

}  // namespace synclog
