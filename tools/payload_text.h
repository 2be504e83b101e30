// Payload bytes made safe for a terminal: a short quoted preview, a hex dump
// and a hex string.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace synclog::dump {

// As many leading bytes as fit in `width` characters, in double quotes:
// printable ASCII as is, \" \\ \n \r \t, anything else \xHH; then "..." if
// bytes were left out. Never a control byte, so a record cannot reprogram
// the terminal.
std::string preview(std::span<const std::byte> payload, size_t width = 48);

// xxd-like rows of 16 bytes, each line indented by two spaces.
void print_hex_dump(std::span<const std::byte> payload);

// Two lowercase hex digits per byte.
std::string hex_string(std::span<const std::byte> payload);

}  // namespace synclog::dump
