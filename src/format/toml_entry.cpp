#include "format/toml_entry.hpp"

#include <sstream>

#include "format/text_lines.hpp"
#include "modelzip/error.hpp"

namespace modelzip::format {

toml::table parse_toml_entry(std::string_view text, const Limits& limits, std::string_view what) {
  if (text.size() > limits.max_text_entry_bytes)
    throw Error(ErrorCode::limit_exceeded, std::string(what) + " is too large");
  check_no_byte_order_mark(text);
  try {
    return toml::parse(text);
  } catch (const toml::parse_error& e) {
    throw Error(ErrorCode::corrupt, "TOML syntax error: " + std::string(e.description()),
                ErrorContext{.line = e.source().begin.line});
  }
}

std::string write_toml_entry(const toml::table& root) {
  constexpr auto flags =
      toml::format_flags::allow_unicode_strings | toml::format_flags::indentation;
  std::ostringstream out;
  out << toml::toml_formatter{root, flags} << "\n";
  return out.str();
}

}  // namespace modelzip::format
