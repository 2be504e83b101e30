// The Log facade's state: wires recovery, the segment manager, the appender,
// the backend and the sync driver. No I/O logic lives here.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "io/file.h"
#include "log/dir_lock.h"
#include "metrics/metrics.h"
#include "segments/appender.h"
#include "segments/manager.h"
#include "segments/recovery.h"
#include "sync/backend.h"
#include "sync/driver.h"
#include "synclog/log.h"

namespace synclog {

// Hidden in libsynclog.so: an internal of the exported Log.
struct __attribute__((visibility("hidden"))) Log::Impl {
  Config config;
  DirLock lock;  // first member: released after everything else
  RecoveryReport report;
  std::vector<seg::Extent> recovered;  // earlier sessions' replayable bytes
  std::unique_ptr<seg::SegmentManager> manager;
  std::unique_ptr<seg::Appender> appender;
  std::unique_ptr<sync::Backend> backend;
  std::string backend_description;
  uint32_t block_size = 0;
  std::unique_ptr<sync::Driver> driver;
  metrics::Metrics metrics;
  std::atomic<bool> closing{false};
  bool closed = false;
  mutable std::mutex release_mu;

  std::vector<seg::Extent> readable_extents() const;
};

}  // namespace synclog
