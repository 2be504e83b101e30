#include "sync/msync_backend.h"

namespace synclog::sync {

Result<void> MsyncBackend::persist(std::span<const Range> ranges) {
  for (const Range& r : ranges) {
    if (auto s = r.segment->mapping().sync_range(r.from, r.to); !s) {
      return make_error(
          s.error().code,
          "msync of segment " + r.segment->path().string() + " failed: " + s.error().message,
          s.error().sys_errno);
    }
  }
  return {};
}

}  // namespace synclog::sync
