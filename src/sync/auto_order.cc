#include "sync/auto_order.h"

namespace synclog::sync {
namespace {

enum class Medium { memory, disk };

struct Row {
  Medium medium;
  SyncMode mode;
  BackendKind order[5];
};

using enum BackendKind;

// The one copy of the measured order: docs/backends.md ("Which backend auto
// picks") has the figures behind each row; change both together.
constexpr Row kMeasured[] = {
    {Medium::disk, SyncMode::batch, {pwrite, aio, msync, msync_pool, uring}},
    {Medium::disk, SyncMode::group, {pwrite, msync, uring, msync_pool, aio}},
    {Medium::disk, SyncMode::periodic, {uring, aio, msync, pwrite, msync_pool}},
    {Medium::memory, SyncMode::batch, {msync, msync_pool, pwrite, uring, aio}},
    // Measured, but within the noise (ranks 0.54-0.65): the batch row.
    {Medium::memory, SyncMode::group, {msync, msync_pool, pwrite, uring, aio}},
    {Medium::memory, SyncMode::periodic, {uring, msync_pool, msync, pwrite, aio}},
};

}  // namespace

AutoOrder auto_order(const Config& config, const io::Filesystem& fs) {
  // Only tmpfs and ext4 were measured. Every other filesystem has a device
  // (or a network) below it, so it gets the disk order, and says so.
  const Medium medium = fs.memory ? Medium::memory : Medium::disk;
  AutoOrder out;
  out.basis = std::string(to_string(config.mode)) + " mode on " + fs.name;
  if (fs.memory) {
    out.basis += " (memory)";
  } else if (fs.name == "ext4") {
    out.basis += " (disk)";
  } else {
    out.basis += " (not measured there: the order measured on an ext4 disk)";
  }
  for (const Row& row : kMeasured) {
    if (row.medium != medium || row.mode != config.mode) continue;
    for (BackendKind k : row.order) {
      if (config.segment_kind == SegmentKind::auto_select ||
          segment_kind_for(k) == config.segment_kind)
        out.backends.push_back(k);
    }
  }
  return out;
}

}  // namespace synclog::sync
