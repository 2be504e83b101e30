// How bytes reach stable storage. The driver (driver.h) decides when; a
// backend decides how. A backend never parses records.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "segments/segment.h"
#include "synclog/config.h"
#include "synclog/error.h"

namespace synclog::sync {

// Bytes [from, to) of a segment's image that must become durable.
struct Range {
  seg::Segment* segment = nullptr;
  uint64_t from = 0;
  uint64_t to = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // Makes every range durable (survives power loss on a device that honours
  // cache flushes) before returning. Called from one thread at a time. Any
  // failure is final for the log: the kernel may have dropped the dirty
  // data, so a retry could lie.
  [[nodiscard]] virtual Result<void> persist(std::span<const Range> ranges) = 0;
  // The segment is complete and synced: drop anything held for it (fixed
  // file and buffer slots) before its image goes away.
  virtual void retire(seg::Segment& segment) { (void)segment; }
};

struct BackendChoice {
  std::unique_ptr<Backend> backend;
  BackendKind kind;
  std::string why;  // for backend=auto: what was chosen and what was passed over
};

// Builds the backend named in the config (auto: the best one that works for
// the segment kind). `block_size` is the direct I/O alignment. A backend
// this machine cannot run is Errc::unsupported with the reason.
[[nodiscard]] Result<BackendChoice> make_backend(const Config& config, uint32_t block_size);

}  // namespace synclog::sync
