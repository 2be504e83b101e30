// backend=auto: the order in which backends are tried, best first, for the
// configured sync mode on the medium the log directory is on. The order is
// measured, not reasoned: docs/backends.md ("Which backend auto picks")
// holds the table, the command that measured it and when.
#pragma once

#include <string>
#include <vector>

#include "io/filesystem.h"
#include "synclog/config.h"

namespace synclog::sync {

struct AutoOrder {
  // Fastest first; with an explicit segment_kind only the backends that
  // sync that kind, in the same order.
  std::vector<BackendKind> backends;
  // What the order is for, for Log::backend(): "batch mode on ext4 (disk)".
  std::string basis;
};

[[nodiscard]] AutoOrder auto_order(const Config& config, const io::Filesystem& fs);

}  // namespace synclog::sync
