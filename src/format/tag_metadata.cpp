#include "format/tag_metadata.hpp"

#include <toml++/toml.h>
#include <sstream>

#include "format/text_lines.hpp"
#include "modelzip/error.hpp"

namespace modelzip::format {

TagMetadata parse_tag_metadata(std::string_view text, const Limits& limits) {
  if (text.size() > limits.max_text_entry_bytes)
    throw Error(ErrorCode::limit_exceeded, "tag metadata entry is too large");
  check_no_byte_order_mark(text);
  toml::table root;
  try {
    root = toml::parse(text);
  } catch (const toml::parse_error& e) {
    throw Error(ErrorCode::corrupt, "TOML syntax error: " + std::string(e.description()),
                ErrorContext{.line = e.source().begin.line});
  }
  TagMetadata metadata;
  const toml::node* safetensors = root.get("safetensors");
  if (!safetensors) return metadata;
  const toml::table* table = safetensors->as_table();
  if (!table)
    throw Error(ErrorCode::corrupt, "safetensors must be a table",
                ErrorContext{.line = safetensors->source().begin.line});
  for (const auto& [key, value] : *table) {
    auto text_value = value.value_exact<std::string>();
    if (!text_value)
      throw Error(ErrorCode::corrupt, "safetensors." + std::string(key.str()) + " must be a string",
                  ErrorContext{.line = value.source().begin.line});
    metadata.safetensors.emplace(std::string(key.str()), std::move(*text_value));
  }
  return metadata;
}

std::string write_tag_metadata(const TagMetadata& metadata) {
  toml::table safetensors;
  for (const auto& [key, value] : metadata.safetensors) safetensors.insert(key, value);
  toml::table root;
  root.insert("safetensors", std::move(safetensors));
  // Basic strings with escapes only, as modelzip.toml (format/archive_metadata.cpp).
  constexpr auto flags =
      toml::format_flags::allow_unicode_strings | toml::format_flags::indentation;
  std::ostringstream out;
  out << toml::toml_formatter{root, flags} << "\n";
  return out.str();
}

}  // namespace modelzip::format
