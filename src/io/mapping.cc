#include "io/mapping.h"

#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>

#include "io/eintr.h"
#include "io/hook.h"

namespace synclog::io {

size_t page_size() {
  static const size_t size = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

Mapping& Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = o.data_;
    size_ = o.size_;
    path_ = std::move(o.path_);
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

Mapping::~Mapping() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

namespace {

bool on_tmpfs(const File& file) {
  struct statfs st;
  return ::fstatfs(file.fd(), &st) == 0 && st.f_type == TMPFS_MAGIC;
}

}  // namespace

Result<Mapping> Mapping::map_shared(const File& file, uint64_t size) {
  // On tmpfs, populate now, on the manager's thread: the pages come in
  // writable, and appends that would each fault a page in run 1.3-1.5x
  // faster (msync, periodic, 128 B and 4 KiB). Where the file system tracks
  // dirty pages (ext4) every page still takes a write-protect fault on its
  // first store, and populating first made those appends 2-3x slower.
  const int flags = MAP_SHARED | (on_tmpfs(file) ? MAP_POPULATE : 0);
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, flags, file.fd(), 0);
  if (p == MAP_FAILED) return sys_error("mmap", file.path(), errno);
  Mapping m;
  m.data_ = static_cast<std::byte*>(p);
  m.size_ = size;
  m.path_ = file.path();
  return m;
}

Result<Mapping> Mapping::map_anonymous(uint64_t size) {
  // Populated now, on the manager's thread, so appends never fault pages in.
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) return sys_error("mmap", "anonymous segment image", errno);
  Mapping m;
  m.data_ = static_cast<std::byte*>(p);
  m.size_ = size;
  return m;
}

Result<void> Mapping::sync_range(uint64_t from, uint64_t to) const {
  if (data_ == nullptr) {
    // A retired mapping has nothing left to sync; succeeding here would
    // claim durability for bytes no msync covered.
    return make_error(Errc::io_error, "msync of " + path_.string() + ": the mapping was released");
  }
  const uint64_t page = page_size();
  uint64_t start = from & ~(page - 1);
  if (to > size_) to = size_;
  if (to <= start) return {};
  int err = hooked(Event{Op::msync, path_, start, to - start, data_ + start}, [&] {
    return restarting([&] { return ::msync(data_ + start, to - start, MS_SYNC) == 0 ? 0 : errno; });
  });
  if (err != 0) return sys_error("msync", path_, err);
  return {};
}

}  // namespace synclog::io
