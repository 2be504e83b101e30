#include <algorithm>
#include <cerrno>

#include "io/file.h"
#include "log/log_impl.h"
#include "segments/format.h"

namespace synclog {

struct Reader::Impl {
  std::filesystem::path dir;
  std::vector<seg::Extent> extents;
  Position from;
  Position limit;  // durable() when the reader was made
  size_t index = 0;
  bool in_extent = false;
  uint64_t loaded = UINT64_MAX;
  std::vector<std::byte> buf;
  uint64_t off = 0;

  Result<void> load(uint64_t id);
  Result<std::optional<Record>> next();
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
  buf.resize(static_cast<size_t>(want));
  auto n = file->read_at(0, buf);
  if (!n) return std::unexpected(n.error());
  buf.resize(*n);
  loaded = id;
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
      if (loaded != e.segment) {
        if (auto r = load(e.segment); !r) return std::unexpected(r.error());
      }
      off = e.begin;
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
    if (d.record.kind == seg::Kind::data && at >= from) return Record{at, d.record.payload};
  }
  return std::optional<Record>();
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
