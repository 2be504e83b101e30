// aio: O_DIRECT writes of whole aligned blocks from the segment image through
// Linux kernel AIO (libaio), up to queue_depth in flight. Each write carries
// RWF_DSYNC, so its completion means its bytes are durable; the variant
// (direct_sync=fdatasync) writes plainly, then fdatasyncs each file once.
#pragma once

#include "sync/backend.h"

namespace synclog::sync {

// Errc::unsupported if this kernel gives no AIO context (ENOSYS, or
// fs.aio-max-nr reached); Errc::invalid_argument unless block_size is a
// power of two of at least 512. Durability from config.direct_sync.
[[nodiscard]] Result<std::unique_ptr<Backend>> make_aio_backend(const Config& config,
                                                                uint32_t block_size);
// The same with the durability variant chosen by the caller.
[[nodiscard]] Result<std::unique_ptr<Backend>> make_aio_backend(const Config& config,
                                                                uint32_t block_size,
                                                                bool use_fdatasync);

}  // namespace synclog::sync
