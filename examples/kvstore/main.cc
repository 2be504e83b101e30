// kvstore: a line-oriented front end for KvStore (kvstore.h).
//
//   kvstore DIR [CONFIG]      CONFIG: synclog "key=value,..." (docs/config.md);
//                             the log lives in DIR/log and runs in batch mode
//
// Reads commands from stdin, one per line, and answers each on stdout:
//   put KEY VALUE   ->  ok           (once the change is durable)
//   mput K1 V1 K2 V2 ...  ->  ok     (one write batch: all pairs or none after a
//                                     crash; values without spaces)
//   del KEY         ->  ok
//   get KEY         ->  value VALUE  |  not found
//   checkpoint      ->  ok           (snapshot written, log released)
//   quit            ->  (exits 0; so does end of input)
// Prints "ready N" (N keys recovered) first. A bad command gets "error: ...";
// a failed write (the log fails stop) prints the error and exits 1.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "kvstore.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s DIR [CONFIG]\n", argv[0]);
    return 2;
  }
  synclog::Config config;
  if (argc == 3) {
    auto parsed = synclog::Config::parse(argv[2]);
    if (!parsed) {
      std::fprintf(stderr, "kvstore: %s\n", parsed.error().describe().c_str());
      return 2;
    }
    config = *parsed;
  }
  auto store = kv::KvStore::open(argv[1], config);
  if (!store) {
    std::fprintf(stderr, "kvstore: %s\n", store.error().describe().c_str());
    return 1;
  }
  kv::KvStore& kv = **store;
  std::printf("ready %zu\n", kv.size());
  std::fflush(stdout);

  std::string line;
  while (std::getline(std::cin, line)) {
    // "CMD KEY REST": the value is everything after the key's space.
    const auto sp1 = line.find(' ');
    const std::string cmd = line.substr(0, sp1);
    std::string key, value;
    if (sp1 != std::string::npos) {
      const auto sp2 = line.find(' ', sp1 + 1);
      key = line.substr(sp1 + 1, sp2 == std::string::npos ? std::string::npos : sp2 - sp1 - 1);
      if (sp2 != std::string::npos) value = line.substr(sp2 + 1);
    }
    synclog::Result<void> done;
    if (cmd == "put" && !key.empty()) {
      done = kv.put(key, value);
    } else if (cmd == "mput") {
      std::istringstream words(line.substr(cmd.size()));
      std::vector<std::string> w{std::istream_iterator<std::string>(words), {}};
      if (w.empty() || w.size() % 2 != 0) {
        std::printf("error: mput needs KEY VALUE pairs\n");
        std::fflush(stdout);
        continue;
      }
      std::vector<kv::KvStore::KeyValue> pairs;
      for (size_t i = 0; i < w.size(); i += 2) pairs.push_back({w[i], w[i + 1]});
      done = kv.put_many(pairs);
    } else if (cmd == "del" && !key.empty()) {
      done = kv.del(key);
    } else if (cmd == "checkpoint") {
      done = kv.checkpoint();
    } else if (cmd == "get" && !key.empty()) {
      auto v = kv.get(key);
      std::printf(v ? "value %s\n" : "not found\n", v ? v->c_str() : "");
      std::fflush(stdout);
      continue;
    } else if (cmd == "quit") {
      break;
    } else {
      std::printf(
          "error: unknown command (put KEY VALUE | mput K1 V1 ... | get KEY | del KEY | checkpoint "
          "| quit)\n");
      std::fflush(stdout);
      continue;
    }
    if (!done) {
      std::printf("error: %s\n", done.error().describe().c_str());
      std::fflush(stdout);
      return 1;
    }
    std::printf("ok\n");
    std::fflush(stdout);  // the acknowledgement: the change is durable
  }
  if (auto r = kv.close(); !r) {
    std::fprintf(stderr, "kvstore: close: %s\n", r.error().describe().c_str());
    return 1;
  }
  return 0;
}
