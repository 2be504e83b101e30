#include "synclog/version.h"

namespace synclog {

const char* version() noexcept { return SYNCLOG_VERSION_STRING; }

}  // namespace synclog
