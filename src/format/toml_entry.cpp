#include "format/toml_entry.hpp"

#include <algorithm>
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

namespace {
constexpr auto kFlags = toml::format_flags::allow_unicode_strings | toml::format_flags::indentation;
}  // namespace

std::string write_toml_entry(const toml::table& root) {
  std::ostringstream out;
  out << toml::toml_formatter{root, kFlags} << "\n";
  return out.str();
}

std::string toml_basic_string(std::string_view text) {
  std::ostringstream out;
  out << toml::toml_formatter{toml::value<std::string>{std::string(text)}, kFlags};
  return out.str();
}

std::string toml_key(std::string_view key) {
  const bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
  return bare ? std::string(key) : toml_basic_string(key);
}

}  // namespace modelzip::format
