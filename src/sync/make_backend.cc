#include "sync/backend.h"
#include "sync/msync_backend.h"

namespace synclog::sync {

Result<std::unique_ptr<Backend>> make_backend(const Config& config) {
  switch (config.backend) {
    case BackendKind::msync:
    case BackendKind::auto_select:
      return std::make_unique<MsyncBackend>();
    default:
      return make_error(Errc::unsupported,
                        std::string("backend '") + to_string(config.backend) +
                            "' is not available in this build (available: msync, auto)");
  }
}

}  // namespace synclog::sync
