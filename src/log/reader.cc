#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>

#include "io/file.h"
#include "log/log_impl.h"
#include "segments/format.h"

namespace synclog {

struct __attribute__((visibility("hidden"))) Reader::Impl {
  std::filesystem::path dir;
  std::vector<seg::Extent> extents;
  Position from;
  bool from_is_boundary = false;  // `from` is the end of a record this reader returned
  Position limit;                 // durable() when the reader was made or last extended
  size_t index = 0;
  bool in_extent = false;
  uint64_t loaded = UINT64_MAX;
  bool loaded_partial = false;  // loaded only up to the limit inside it
  std::vector<std::byte> buf;
  uint64_t off = 0;

  Result<void> load(uint64_t id);
  Result<std::optional<Record>> next();
  // Moves the end to `new_limit` (for tailing): reads on from just after
  // the last record returned, re-reading only bytes not yet loaded.
  void extend(Position new_limit, std::vector<seg::Extent> new_extents);
};

Reader::Reader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Reader::Reader(Reader&&) noexcept = default;
Reader& Reader::operator=(Reader&&) noexcept = default;
Reader::~Reader() = default;

Result<std::optional<Record>> Reader::next() { return impl_->next(); }

Result<void> Reader::Impl::load(uint64_t id) {
  auto file = io::File::open(dir / seg::segment_file_name(id), io::File::Mode::read);
  if (!file) {
    if (file.error().sys_errno == ENOENT) {
      return make_error(Errc::released,
                        "segment " + std::to_string(id) + " was released while a reader needed it");
    }
    return std::unexpected(file.error());
  }
  auto size = file->size();
  if (!size) return std::unexpected(size.error());
  uint64_t want = *size;
  if (id == limit.segment()) want = std::min<uint64_t>(want, limit.offset());
  // A tailer extending within the same segment reads only the new bytes.
  const size_t have = loaded == id ? std::min<size_t>(buf.size(), want) : 0;
  buf.resize(static_cast<size_t>(want));
  auto n = file->read_at(have, std::span(buf).subspan(have));
  if (!n) return std::unexpected(n.error());
  buf.resize(have + *n);
  loaded = id;
  loaded_partial = id == limit.segment();
  return {};
}

Result<std::optional<Record>> Reader::Impl::next() {
  while (index < extents.size()) {
    const seg::Extent& e = extents[index];
    if (e.segment > limit.segment()) break;
    if (e.segment < from.segment()) {
      ++index;
      continue;
    }
    if (!in_extent) {
      // A segment loaded while it held the limit may have grown since.
      const bool grown =
          loaded_partial && (e.segment != limit.segment() || buf.size() < limit.offset());
      if (loaded != e.segment || grown) {
        if (auto r = load(e.segment); !r) return std::unexpected(r.error());
      }
      off = e.begin;
      if (from_is_boundary && e.segment == from.segment())
        off = std::max<uint64_t>(off, from.offset());
      in_extent = true;
    }
    uint64_t end = std::min<uint64_t>(e.end, buf.size());
    if (off >= end) {
      in_extent = false;
      ++index;
      continue;
    }
    const auto d = seg::decode_record(buf, e.segment, static_cast<uint32_t>(off));
    if (d.status != seg::Decode::ok) {
      return make_error(Errc::corruption,
                        "record at " + Position(e.segment, off).to_string() +
                            " no longer validates: " + (d.reason ? d.reason : "zeroed"));
    }
    const Position at(e.segment, off);
    off += d.record.framed;
    if (d.record.kind == seg::Kind::end) off = end;
    if (d.record.kind == seg::Kind::data && at >= from) {
      from = Position(e.segment, off);
      from_is_boundary = true;
      return Record{at, d.record.payload};
    }
  }
  return std::optional<Record>();
}

void Reader::Impl::extend(Position new_limit, std::vector<seg::Extent> new_extents) {
  limit = new_limit;
  extents = std::move(new_extents);
  index = 0;
  in_extent = false;
}

struct __attribute__((visibility("hidden"))) Tailer::Impl {
  const Log::Impl* log;
  Reader::Impl reader;
};

Tailer::Tailer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tailer::Tailer(Tailer&&) noexcept = default;
Tailer& Tailer::operator=(Tailer&&) noexcept = default;
Tailer::~Tailer() = default;

Result<std::optional<Record>> Tailer::next(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    auto rec = impl_->reader.next();
    if (!rec || *rec) return rec;
    // At the end of what was durable: poll for more. Polling keeps the
    // append path free of any tailer bookkeeping; the pause grows to 2 ms.
    const Position durable = impl_->log->driver->durable();
    if (durable > impl_->reader.limit) {
      std::lock_guard lock(impl_->log->release_mu);
      impl_->reader.extend(durable, impl_->log->readable_extents());
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::optional<Record>();
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(2));
  }
}

Result<Tailer> Log::tail(Position from) const {
  auto impl = std::make_unique<Tailer::Impl>();
  impl->log = impl_.get();
  impl->reader.dir = impl_->config.dir;
  impl->reader.from = from;
  impl->reader.limit = impl_->driver->durable();
  {
    std::lock_guard lock(impl_->release_mu);
    impl->reader.extents = impl_->readable_extents();
  }
  return Tailer(std::move(impl));
}

Result<Reader> Log::read(Position from) const {
  auto impl = std::make_unique<Reader::Impl>();
  impl->dir = impl_->config.dir;
  impl->from = from;
  impl->limit = impl_->driver->durable();
  {
    std::lock_guard lock(impl_->release_mu);
    impl->extents = impl_->readable_extents();
  }
  return Reader(std::move(impl));
}

}  // namespace synclog
