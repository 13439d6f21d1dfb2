// JSON output for the CLI's --json modes, through the one JSON text module
// (core/json_text.hpp): exact strings, RFC 8259 escaping.
#pragma once

#include <cmath>
#include <string>
#include <string_view>

#include "core/json_text.hpp"

namespace modelzip::cli {

inline std::string json_string(std::string_view s) {
  return modelzip::detail::json_string(s);
}

// Shortest round-trip text of a double; non-finite values become null.
inline std::string json_number(double v) {
  return std::isfinite(v) ? modelzip::detail::json_double(v, 6) : "null";
}

inline std::string json_bool(bool b) {
  return b ? "true" : "false";
}

}  // namespace modelzip::cli
