// Parsing and printing of the values flags and job files take: byte counts
// with units, durations, comma lists. Parsers return an error string instead
// of throwing; an empty string means success.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bench {

// "4096", "4k", "4KiB", "32MiB", "1GiB" (k/K/KiB = 1024).
std::string parse_bytes(std::string_view text, uint64_t* out);
// "2s", "300ms", "0.3s", "500us", "1.5" (seconds).
std::string parse_seconds(std::string_view text, double* out);
// A positive whole number.
std::string parse_count(std::string_view text, uint64_t* out);

// Splits on `sep`, trimming blanks; empty items are dropped.
std::vector<std::string> split(std::string_view text, char sep = ',');
std::string trim(std::string_view s);

// 4096 -> "4KiB", 128 -> "128B", 33554432 -> "32MiB" (exact units only, else bytes).
std::string format_bytes(uint64_t n);
// 2.0 -> "2s", 0.3 -> "300ms".
std::string format_seconds(double s);
// 83 -> "1m23s".
std::string format_eta(double s);

}  // namespace bench
