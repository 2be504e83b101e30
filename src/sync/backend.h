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
  // Direct backends: writes one block of zeros at offset block_size of
  // `file` (opened O_DIRECT in the log directory) and makes it durable the
  // way persist() does, so what this kernel or filesystem refuses (the
  // alignment, RWF_DSYNC) is Errc::unsupported at open, not a fail-stop at
  // the first sync. The caller truncates the file afterwards.
  [[nodiscard]] virtual Result<void> probe(const io::File& file) {
    (void)file;
    return {};
  }
};

// The error of a failed probe() step: EINVAL and EOPNOTSUPP are refusals
// (Errc::unsupported, with `refused` saying what it means), anything else
// the I/O error it is.
std::unexpected<Error> probe_error(const char* backend, const std::string& what,
                                   const io::File& file, int err, const std::string& refused);

// Builds the backend named in the config, which is not auto (Log::open
// tries auto's candidates one by one, sync/auto_order.h). `block_size` is
// the direct I/O alignment. A backend this machine cannot run is
// Errc::unsupported with the reason. With `probe` (direct segments), it
// must also pass probe() on it.
[[nodiscard]] Result<std::unique_ptr<Backend>> make_backend(const Config& config,
                                                            uint32_t block_size,
                                                            const io::File* probe = nullptr);

}  // namespace synclog::sync
