#include "format/tag_metadata.hpp"

#include "format/toml_entry.hpp"
#include "modelzip/error.hpp"

namespace modelzip::format {

TagMetadata parse_tag_metadata(std::string_view text, const Limits& limits) {
  const toml::table root = parse_toml_entry(text, limits, "tag metadata entry");
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
  // Written line by line: the keys are arbitrary text (toml_key).
  std::string out = "[safetensors]\n";
  for (const auto& [key, value] : metadata.safetensors)
    out += toml_key(key) + " = " + toml_basic_string(value) + "\n";
  return out;
}

}  // namespace modelzip::format
