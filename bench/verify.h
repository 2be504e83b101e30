// After a point: reopen the log with the same Config, replay it and check
// that it holds exactly what the writers were told was appended. For each
// writer thread the records must come back with seq 0, 1, 2, ... in order
// (G2: a prefix of the append order, no holes, no duplicates), every one
// intact (record.h: header, pattern, trailer), and all acknowledged ones
// present (G1). A clean close must leave no damage and no torn tail.
//
// With --retain the run released old segments. Then F, the segment of the
// first record replayed, marks where the log now begins: each thread must
// start at the first seq it appended into a segment >= F (from
// Measurement::segment_starts), and no more segments may lie before F than
// the log reports released, so a lost segment still shows.
#pragma once

#include <cstdint>
#include <string>

#include "record.h"
#include "runner.h"
#include "synclog/config.h"

namespace bench {

struct Verification {
  bool ok = false;
  std::string message;   // why it failed; empty when ok
  uint64_t records = 0;  // records replayed
  double seconds = 0;    // open + replay + close
  double open_s = 0;     // of which Log::open (recovery)
};

// `payload` is the kind the writers appended (their patterns are rebuilt
// from it).
Verification verify_log(const synclog::Config& config, const Measurement& m, uint64_t max_size,
                        Payload payload = Payload::random);

}  // namespace bench
