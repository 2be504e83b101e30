#include "json_out.h"

#include <cstdio>
#include <string>

namespace synclog::dump {

void emit(const json& j) {
  const std::string line = j.dump(-1, ' ', false, json::error_handler_t::replace);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
}

json to_json(Position p) { return p.to_string(); }

json to_json(const std::optional<Position>& p) { return p ? to_json(*p) : json(nullptr); }

json to_json(const Damage& d) {
  return {{"position", to_json(d.at)},
          {"segment", d.at.segment()},
          {"offset", d.at.offset()},
          {"bytes", d.bytes},
          {"reason", d.reason}};
}

json to_json(const std::vector<Damage>& regions) {
  json a = json::array();
  for (const auto& d : regions) a.push_back(to_json(d));
  return a;
}

json torn_tail_json(const RecoveryReport& r) {
  if (!r.torn_tail) return nullptr;
  return {{"bytes", r.torn_bytes}, {"at", to_json(r.end)}};
}

}  // namespace synclog::dump
