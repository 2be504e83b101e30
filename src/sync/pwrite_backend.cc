#include "sync/pwrite_backend.h"

namespace synclog::sync {

Result<void> PwriteBackend::persist(std::span<const Range> ranges) {
  for (const Range& r : ranges) {
    const auto bytes = r.segment->image().subspan(r.from, r.to - r.from);
    if (auto w = r.segment->file().write_at(r.from, bytes); !w) return w;
    if (auto s = r.segment->file().datasync(); !s) return s;
  }
  return {};
}

}  // namespace synclog::sync
