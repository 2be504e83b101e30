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

}  // namespace

std::unexpected<Error> probe_error(const char* backend, const std::string& what,
                                   const io::File& file, int err, const std::string& refused) {
  std::string message = std::string(backend) + ": " + what + " to " + file.path().string() +
                        " failed: " + std::strerror(err);
  if (err == EINVAL || err == EOPNOTSUPP)
    return make_error(Errc::unsupported, message + " (" + refused + ")", err);
  return io::sys_error(std::string(backend) + ": " + what + " to", file.path(), err);
}

Result<std::unique_ptr<Backend>> make_backend(const Config& config, uint32_t block_size,
                                              const io::File* probe) {
  auto b = construct(config.backend, config, block_size);
  if (!b || probe == nullptr) return b;
  if (auto r = (*b)->probe(*probe); !r) return std::unexpected(r.error());
  return b;
}

}  // namespace synclog::sync
