// What direct_sync means on the log's filesystem: the uring and aio
// backends trust RWF_DSYNC only where it is known to be honoured.
#pragma once

#include <filesystem>
#include <string>

#include "io/filesystem.h"
#include "synclog/config.h"
#include "synclog/error.h"

namespace synclog::sync {

struct DirectSyncChoice {
  DirectSync use = DirectSync::fdatasync;  // dsync or fdatasync, never auto
  std::string why;                         // for Log::backend(); empty if as configured
};

// auto: dsync where honoured, else fdatasync (and `why` says so). An
// explicit dsync where it is not known to be honoured is Errc::unsupported
// naming the filesystem.
[[nodiscard]] Result<DirectSyncChoice> choose_direct_sync(DirectSync configured,
                                                          const io::Filesystem& fs,
                                                          const std::filesystem::path& dir);

// The same for config.dir (probing its filesystem): what the uring and aio
// backends of a log opened with `config` use.
[[nodiscard]] Result<DirectSyncChoice> choose_direct_sync(const Config& config);

}  // namespace synclog::sync
