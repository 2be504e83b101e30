// A Position names a byte in the log: the segment id in the high 32 bits and
// the offset inside that segment in the low 32 bits, so positions order
// exactly like the log and fit one atomic word.
#pragma once

#include <compare>
#include <cstdint>
#include <string>

namespace synclog {

class Position {
 public:
  constexpr Position() = default;
  constexpr Position(uint64_t segment, uint64_t offset)
      : raw_((segment << 32) | (offset & 0xffffffffu)) {}
  static constexpr Position from_raw(uint64_t raw) {
    Position p;
    p.raw_ = raw;
    return p;
  }

  constexpr uint64_t segment() const { return raw_ >> 32; }
  constexpr uint64_t offset() const { return raw_ & 0xffffffffu; }
  constexpr uint64_t raw() const { return raw_; }

  constexpr auto operator<=>(const Position&) const = default;

  std::string to_string() const {
    return std::to_string(segment()) + ":" + std::to_string(offset());
  }

 private:
  uint64_t raw_ = 0;
};

}  // namespace synclog
