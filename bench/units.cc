#include "units.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace bench {
namespace {

// Splits "12.5ms" into the number and the unit.
bool number_and_unit(std::string_view text, double* value, std::string_view* unit) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0) return false;
  auto [p, ec] = std::from_chars(text.data(), text.data() + i, *value);
  if (ec != std::errc() || p != text.data() + i) return false;
  *unit = text.substr(i);
  return true;
}

}  // namespace

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  while (true) {
    const size_t at = text.find(sep);
    std::string item = trim(text.substr(0, at));
    if (!item.empty()) out.push_back(std::move(item));
    if (at == std::string_view::npos) break;
    text.remove_prefix(at + 1);
  }
  return out;
}

std::string parse_bytes(std::string_view text, uint64_t* out) {
  const std::string want =
      "'" + std::string(text) + "' is not a byte count (e.g. 128, 4KiB, 32MiB)";
  uint64_t n = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || p == text.data()) return want;
  const std::string_view unit(p, text.data() + text.size() - p);
  uint64_t mult = 0;
  if (unit.empty() || unit == "B" || unit == "b") mult = 1;
  if (unit == "k" || unit == "K" || unit == "KiB" || unit == "KB") mult = 1ull << 10;
  if (unit == "m" || unit == "M" || unit == "MiB" || unit == "MB") mult = 1ull << 20;
  if (unit == "g" || unit == "G" || unit == "GiB" || unit == "GB") mult = 1ull << 30;
  if (mult == 0 || n > UINT64_MAX / mult) return want;
  *out = n * mult;
  return {};
}

std::string parse_seconds(std::string_view text, double* out) {
  const std::string want = "'" + std::string(text) + "' is not a duration (e.g. 2s, 300ms, 0.5s)";
  double v = 0;
  std::string_view unit;
  if (!number_and_unit(text, &v, &unit)) return want;
  double mult = 0;
  if (unit.empty() || unit == "s") mult = 1;
  if (unit == "ms") mult = 1e-3;
  if (unit == "us") mult = 1e-6;
  if (unit == "m" || unit == "min") mult = 60;
  if (mult == 0 || !std::isfinite(v)) return want;
  *out = v * mult;
  return {};
}

std::string parse_count(std::string_view text, uint64_t* out) {
  uint64_t n = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || p != text.data() + text.size() || n == 0) {
    return "'" + std::string(text) + "' is not a positive whole number";
  }
  *out = n;
  return {};
}

std::string format_bytes(uint64_t n) {
  if (n >= (1ull << 30) && n % (1ull << 30) == 0) return std::to_string(n >> 30) + "GiB";
  if (n >= (1ull << 20) && n % (1ull << 20) == 0) return std::to_string(n >> 20) + "MiB";
  if (n >= (1ull << 10) && n % (1ull << 10) == 0) return std::to_string(n >> 10) + "KiB";
  return std::to_string(n) + "B";
}

std::string format_seconds(double s) {
  char buf[32];
  if (s >= 1 || s == 0) {
    std::snprintf(buf, sizeof buf, "%gs", s);
  } else {
    std::snprintf(buf, sizeof buf, "%gms", s * 1e3);
  }
  return buf;
}

std::string format_eta(double s) {
  const auto total = static_cast<long>(std::lround(std::max(0.0, s)));
  char buf[32];
  if (total >= 60) {
    std::snprintf(buf, sizeof buf, "%ldm%02lds", total / 60, total % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lds", total);
  }
  return buf;
}

}  // namespace bench
