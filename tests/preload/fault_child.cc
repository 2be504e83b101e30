// Appends until the log fails, printing what happened; run by
// fault_preload_test under the fail_fdatasync shim.
#include <cstdio>
#include <string>

#include "synclog/log.h"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  auto cfg = synclog::Config::parse(argv[2]);
  if (!cfg) return 3;
  cfg->dir = argv[1];
  auto log = synclog::Log::open(*cfg);
  if (!log) {
    std::printf("open-error %s\n", log.error().describe().c_str());
    return 4;
  }
  for (int i = 0; i < 100000; ++i) {
    auto pos = (*log)->append("record " + std::to_string(i));
    if (!pos) {
      std::printf("error %s\n", pos.error().describe().c_str());
      auto again = (*log)->append("after the failure");
      std::printf("again %s\n", again ? "acked" : again.error().describe().c_str());
      std::fflush(stdout);
      return 0;
    }
    std::printf("acked %d %llu\n", i, static_cast<unsigned long long>(pos->raw()));
  }
  std::printf("no-failure\n");
  return 0;
}
