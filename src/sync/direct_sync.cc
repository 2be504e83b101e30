#include "sync/direct_sync.h"

namespace synclog::sync {

Result<DirectSyncChoice> choose_direct_sync(DirectSync configured, const io::Filesystem& fs,
                                            const std::filesystem::path& dir) {
  switch (configured) {
    case DirectSync::fdatasync:
      return DirectSyncChoice{DirectSync::fdatasync, ""};
    case DirectSync::dsync:
      if (fs.async_dsync_honoured) return DirectSyncChoice{DirectSync::dsync, ""};
      return make_error(Errc::unsupported,
                        "direct_sync=dsync: RWF_DSYNC on io_uring and libaio direct writes is "
                        "not known to be honoured on " +
                            fs.name + " (" + dir.string() +
                            "): a write could complete before its data is durable; use "
                            "direct_sync=auto or direct_sync=fdatasync");
    case DirectSync::auto_select:
      break;
  }
  if (fs.async_dsync_honoured) {
    return DirectSyncChoice{DirectSync::dsync,
                            "direct_sync=dsync: RWF_DSYNC is honoured on " + fs.name};
  }
  return DirectSyncChoice{
      DirectSync::fdatasync,
      "direct_sync=fdatasync: RWF_DSYNC is not known to be honoured on " + fs.name};
}

Result<DirectSyncChoice> choose_direct_sync(const Config& config) {
  auto fs = io::probe_filesystem(config.dir);
  if (!fs) return std::unexpected(fs.error());
  return choose_direct_sync(config.direct_sync, *fs, config.dir);
}

}  // namespace synclog::sync
