// One point of the sweep: a medium, a full Config and how to load it.
#pragma once

#include <cstdint>
#include <string>

#include "medium.h"
#include "options.h"
#include "synclog/config.h"

namespace bench {

struct Point {
  size_t index = 0;  // 1-based, in sweep order
  std::string job;
  const MediumInfo* medium = nullptr;
  std::string backend;  // Config names
  std::string segment_kind;
  std::string mode;
  uint32_t threads = 1;
  uint32_t inflight = 0;  // append_async calls each writer keeps outstanding; 0: blocking
  uint32_t batch = 1;     // records per append_batch; 1: single appends
  SizeSpec size;
  synclog::Config config;  // every key but dir
  std::string axes;        // the Config keys this point set, "key=value,..."

  double duration_s = 0;  // measured window (ignored when ops > 0)
  uint64_t ops = 0;       // > 0: total appends instead of a duration
  double warmup_s = 0;
  uint32_t retain = 0;     // release segments this far behind the slowest writer; 0: never
  uint64_t max_bytes = 0;  // > 0: end early after this many payload bytes

  // "disk msync/mmap batch 128B x4", then " qd8" and " b16" when set
  std::string label() const;
};

}  // namespace bench
