#include "format/tag_metadata.hpp"

#include "format/toml_entry.hpp"
#include "modelzip/error.hpp"

namespace modelzip::format {
namespace {

// The string -> string table `name` of `root` into `out` (nothing without it).
void parse_string_table(const toml::table& root, std::string_view name,
                        std::map<std::string, std::string>& out) {
  const toml::node* node = root.get(name);
  if (!node) return;
  const toml::table* table = node->as_table();
  if (!table)
    throw Error(ErrorCode::corrupt, std::string(name) + " must be a table",
                ErrorContext{.line = node->source().begin.line});
  for (const auto& [key, value] : *table) {
    auto text_value = value.value_exact<std::string>();
    if (!text_value)
      throw Error(ErrorCode::corrupt,
                  std::string(name) + "." + std::string(key.str()) + " must be a string",
                  ErrorContext{.line = value.source().begin.line});
    out.emplace(std::string(key.str()), std::move(*text_value));
  }
}

// Written line by line: the keys are arbitrary text (toml_key).
void write_string_table(std::string& out, std::string_view name,
                        const std::map<std::string, std::string>& table) {
  out += "[" + std::string(name) + "]\n";
  for (const auto& [key, value] : table)
    out += toml_key(key) + " = " + toml_basic_string(value) + "\n";
}

}  // namespace

TagMetadata parse_tag_metadata(std::string_view text, const Limits& limits) {
  const toml::table root = parse_toml_entry(text, limits, "tag metadata entry");
  TagMetadata metadata;
  parse_string_table(root, "safetensors", metadata.safetensors);
  parse_string_table(root, "torch", metadata.torch);
  return metadata;
}

std::string write_tag_metadata(const TagMetadata& metadata) {
  std::string out;
  if (!metadata.safetensors.empty() || metadata.torch.empty())
    write_string_table(out, "safetensors", metadata.safetensors);
  if (!metadata.torch.empty()) write_string_table(out, "torch", metadata.torch);
  return out;
}

}  // namespace modelzip::format
