// The smallest program that embeds synclog: open a log in DIR, append two
// records (durable on return: batch mode), close, reopen, replay, print "ok".
//   consumer DIR
#include <synclog/log.h>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  // The library linked is the one these headers describe.
  if (std::string(synclog::version()) != SYNCLOG_VERSION_STRING)
    return std::fprintf(stderr, "version %s, headers %s\n", synclog::version(),
                        SYNCLOG_VERSION_STRING),
           1;
  synclog::Config config;
  config.dir = argv[1];
  config.segment_size = 1 << 20;
  const std::vector<std::string> records = {"hello", "synclog"};
  {
    auto log = synclog::Log::open(config);
    if (!log) return std::fprintf(stderr, "open: %s\n", log.error().describe().c_str()), 1;
    for (const auto& r : records) {
      if (auto at = (*log)->append(r); !at) return std::fprintf(stderr, "append failed\n"), 1;
    }
    if (!(*log)->close()) return std::fprintf(stderr, "close failed\n"), 1;
  }
  auto log = synclog::Log::open(config);  // recovers what the first session wrote
  if (!log) return std::fprintf(stderr, "reopen: %s\n", log.error().describe().c_str()), 1;
  auto reader = (*log)->read();
  if (!reader) return 1;
  std::vector<std::string> seen;
  for (;;) {
    auto rec = reader->next();
    if (!rec) return std::fprintf(stderr, "read: %s\n", rec.error().describe().c_str()), 1;
    if (!*rec) break;
    seen.emplace_back(reinterpret_cast<const char*>((*rec)->data.data()), (*rec)->data.size());
  }
  if (seen != records) return std::fprintf(stderr, "replay returned %zu records\n", seen.size()), 1;
  std::printf("ok\n");
  return 0;
}
