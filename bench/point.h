// One point of the sweep: a medium, a full Config and how to load it.
#pragma once

#include <cstdint>
#include <string>

#include "medium.h"
#include "options.h"
#include "record.h"
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
  Payload payload = Payload::random;
  // Config compression / encryption; "none" sets no key. They are not in
  // `config`: run_sweep applies them (sweep.h, apply_transforms) once the
  // key file exists, so the backend probe opens logs that need no key.
  std::string compression = "none";
  std::string encryption = "none";
  synclog::Config config;   // every key but dir, compression and encryption
  std::string config_text;  // `config` with compression and encryption, as rows show it
  std::string axes;         // the Config keys this point set, "key=value,..."

  double duration_s = 0;  // measured window (ignored when ops > 0)
  uint64_t ops = 0;       // > 0: total appends instead of a duration
  double warmup_s = 0;
  uint32_t retain = 0;     // release segments this far behind the slowest writer; 0: never
  uint64_t max_bytes = 0;  // > 0: end early after this many payload bytes

  // "disk msync/mmap batch 128B x4", then " qd8", " b16", " text", " lz4" and
  // " aes-256-gcm" when set
  std::string label() const;
};

}  // namespace bench
