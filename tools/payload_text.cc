#include "payload_text.h"

#include <algorithm>
#include <cstdio>

namespace synclog::dump {

namespace {
constexpr char kDigits[] = "0123456789abcdef";

std::string escaped(unsigned char c) {
  switch (c) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      if (c >= 0x20 && c < 0x7f) return std::string(1, static_cast<char>(c));
      return {'\\', 'x', kDigits[c >> 4], kDigits[c & 15]};
  }
}

}  // namespace

std::string preview(std::span<const std::byte> payload, size_t width) {
  std::string s = "\"";
  size_t used = 0;
  for (; used < payload.size(); ++used) {
    const std::string e = escaped(static_cast<unsigned char>(payload[used]));
    if (s.size() - 1 + e.size() > width) break;
    s += e;
  }
  s += '"';
  if (used < payload.size()) s += "...";
  return s;
}

void print_hex_dump(std::span<const std::byte> b) {
  for (size_t row = 0; row < b.size(); row += 16) {
    std::printf("  %08zx: ", row);
    for (size_t i = row; i < row + 16; ++i) {
      if (i < b.size()) {
        std::printf("%02x", static_cast<unsigned>(b[i]));
      } else {
        std::printf("  ");
      }
      if (i % 2 == 1) std::printf(" ");
    }
    std::printf(" ");
    for (size_t i = row; i < std::min(row + 16, b.size()); ++i) {
      const int c = static_cast<int>(b[i]);
      std::putchar(c >= 0x20 && c < 0x7f ? c : '.');
    }
    std::printf("\n");
  }
}

std::string hex_string(std::span<const std::byte> payload) {
  std::string s;
  s.reserve(payload.size() * 2);
  for (std::byte b : payload) {
    const auto c = static_cast<unsigned char>(b);
    s += kDigits[c >> 4];
    s += kDigits[c & 15];
  }
  return s;
}

}  // namespace synclog::dump
