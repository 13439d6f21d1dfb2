// <tag>/metadata.toml: a tag's free-form metadata and what modelzip keeps of
// the torch state dict it was saved from (FORMAT.md section 3.1). TOML 1.0:
//
//   [safetensors]          # free-form string -> string: safetensors'
//   format = "pt"          # "__metadata__" of imported files, or given at save
//   [torch]                # string -> string
//   state_dict_metadata = "{\"\": {\"version\": 2}}"   # state_dict()._metadata
//
// Unknown keys and tables are ignored; a known one of the wrong type (a
// `safetensors` or `torch` that is not a table, a value that is not a
// string) is Error(corrupt) with its line.
//
// Thread safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "modelzip/limits.hpp"

namespace modelzip::format {

// The entry's name inside a tag folder.
inline constexpr std::string_view kTagMetadataFile = "metadata.toml";

struct TagMetadata {
  std::map<std::string, std::string> safetensors;  // the free-form pairs, by key
  std::map<std::string, std::string> torch;        // state_dict_metadata: JSON text
  bool empty() const noexcept { return safetensors.empty() && torch.empty(); }
  bool operator==(const TagMetadata&) const = default;
};

// Throws Error(corrupt) with the line for TOML syntax errors, a byte-order
// mark or wrong types; Error(limit_exceeded) for a text over
// limits.max_text_entry_bytes.
TagMetadata parse_tag_metadata(std::string_view toml_text, const Limits& limits);
// The entry's text; parse_tag_metadata gives `metadata` back exactly (any
// UTF-8 key or value, empty ones and control characters included). A table
// is written when it has pairs (`safetensors` also when both are empty).
std::string write_tag_metadata(const TagMetadata& metadata);

}  // namespace modelzip::format
