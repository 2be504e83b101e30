#include <cerrno>
#include <cstring>

#include "sync/aio_backend.h"
#include "sync/backend.h"
#include "sync/msync_backend.h"
#include "sync/msync_pool_backend.h"
#include "sync/pwrite_backend.h"
#include "sync/uring_backend.h"

namespace synclog::sync {
namespace {

Result<std::unique_ptr<Backend>> construct(BackendKind kind, const Config& config,
                                           uint32_t block_size) {
  switch (kind) {
    case BackendKind::msync:
      return std::make_unique<MsyncBackend>();
    case BackendKind::msync_pool:
      return make_msync_pool_backend(config.sync_threads);
    case BackendKind::pwrite:
      return std::make_unique<PwriteBackend>();
    case BackendKind::uring:
      return make_uring_backend(config, block_size);
    case BackendKind::aio:
      return make_aio_backend(config, block_size);
    default:
      break;
  }
  return make_error(Errc::unsupported, std::string("backend '") + to_string(kind) +
                                           "' is not available in this build");
}

Result<std::unique_ptr<Backend>> build(BackendKind kind, const Config& config, uint32_t block_size,
                                       const io::File* probe) {
  auto b = construct(kind, config, block_size);
  if (!b || probe == nullptr) return b;
  if (auto r = (*b)->probe(*probe); !r) return std::unexpected(r.error());
  return b;
}

}  // namespace

std::unexpected<Error> probe_error(const char* backend, const std::string& what,
                                   const io::File& file, int err, const std::string& refused) {
  std::string message = std::string(backend) + ": " + what + " to " + file.path().string() +
                        " failed: " + std::strerror(err);
  if (err == EINVAL || err == EOPNOTSUPP)
    return make_error(Errc::unsupported, message + " (" + refused + ")", err);
  return io::sys_error(std::string(backend) + ": " + what + " to", file.path(), err);
}

Result<BackendChoice> make_backend(const Config& config, uint32_t block_size,
                                   const io::File* probe) {
  if (config.backend != BackendKind::auto_select) {
    auto b = build(config.backend, config, block_size, probe);
    if (!b) return std::unexpected(b.error());
    return BackendChoice{std::move(*b), config.backend, ""};
  }
  std::vector<BackendKind> candidates;
  switch (config.segment_kind) {
    case SegmentKind::mmap:
      candidates = {config.sync_threads > 1 ? BackendKind::msync_pool : BackendKind::msync,
                    BackendKind::msync};
      break;
    case SegmentKind::direct:
      candidates = {BackendKind::uring, BackendKind::aio};
      break;
    case SegmentKind::buffered:
      candidates = {BackendKind::pwrite};
      break;
  }
  std::string passed;
  for (BackendKind k : candidates) {
    auto b = build(k, config, block_size, probe);
    if (b) {
      std::string why = std::string("backend=auto chose ") + to_string(k) + " for " +
                        to_string(config.segment_kind) + " segments";
      if (!passed.empty()) why += " (" + passed + ")";
      return BackendChoice{std::move(*b), k, why};
    }
    // Only a backend this machine refuses is passed over: an I/O error in
    // the probe is the directory's, not the backend's.
    if (b.error().code != Errc::unsupported) return std::unexpected(b.error());
    passed += (passed.empty() ? "" : "; ") + std::string(to_string(k)) + ": " + b.error().message;
  }
  return make_error(Errc::unsupported, "backend=auto found no working backend for " +
                                           std::string(to_string(config.segment_kind)) +
                                           " segments: " + passed);
}

}  // namespace synclog::sync
