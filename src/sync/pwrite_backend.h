// pwrite: buffered pwrite of each range from the segment image, then one
// fdatasync per file. The portable baseline every other backend is measured
// against.
#pragma once

#include "sync/backend.h"

namespace synclog::sync {

class PwriteBackend final : public Backend {
 public:
  const char* name() const override { return "pwrite"; }
  [[nodiscard]] Result<void> persist(std::span<const Range> ranges) override;
};

}  // namespace synclog::sync
