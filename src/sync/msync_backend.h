// msync: one thread (the sync driver's) msyncs each range of the shared
// mapping. Cassandra's default; bounded by one thread's msync rate.
#pragma once

#include "sync/backend.h"

namespace synclog::sync {

class MsyncBackend final : public Backend {
 public:
  const char* name() const override { return "msync"; }
  [[nodiscard]] Result<void> persist(std::span<const Range> ranges) override;
};

}  // namespace synclog::sync
