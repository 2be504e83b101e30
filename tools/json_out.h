// JSON output of synclog-dump (--json): one object per line, so a record
// stream is JSON Lines and a summary is a single object.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "synclog/log.h"
#include "synclog/position.h"

namespace synclog::dump {

// Fields stay in the order written: position and kind first.
using json = nlohmann::ordered_json;

// Prints `j` on one line. Bytes that are not UTF-8 (a foreign file's name)
// become U+FFFD instead of failing the whole output.
void emit(const json& j);

json to_json(Position p);
json to_json(const std::optional<Position>& p);  // null when absent
json to_json(const Damage& d);
json to_json(const std::vector<Damage>& regions);
// {"bytes", "at"} of the unfinished write recovery dropped; null if none.
json torn_tail_json(const RecoveryReport& r);

}  // namespace synclog::dump
