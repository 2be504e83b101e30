// A shared, writable mapping of a whole file. The file must already have its
// blocks allocated (File::allocate) so that stores can never raise SIGBUS on
// a full disk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "io/file.h"
#include "synclog/error.h"

namespace synclog::io {

class Mapping {
 public:
  Mapping() = default;
  Mapping(Mapping&& o) noexcept : data_(o.data_), size_(o.size_), path_(std::move(o.path_)) {
    o.data_ = nullptr;
    o.size_ = 0;
  }
  Mapping& operator=(Mapping&& o) noexcept;
  ~Mapping();

  [[nodiscard]] static Result<Mapping> map_shared(const File& file, uint64_t size);
  // Private zero-filled memory, page-aligned and populated up front: the
  // image of a direct or buffered segment.
  [[nodiscard]] static Result<Mapping> map_anonymous(uint64_t size);

  std::span<std::byte> bytes() const { return {data_, size_}; }

  // msync(MS_SYNC) of [from, to) widened to whole pages.
  [[nodiscard]] Result<void> sync_range(uint64_t from, uint64_t to) const;

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  std::filesystem::path path_;  // the mapped file, for messages and the hook
};

size_t page_size();

}  // namespace synclog::io
