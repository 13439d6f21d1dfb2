// <tag>/metadata.toml: metadata of a tag's source files that modelzip keeps
// so an export gives it back (FORMAT.md section 3.1). TOML 1.0:
//
//   [safetensors]          # the "__metadata__" of the safetensors files the
//   format = "pt"          # tag was imported from: string -> string
//
// Unknown keys and tables are ignored; a known one of the wrong type (a
// `safetensors` that is not a table, a value that is not a string) is
// Error(corrupt) with its line.
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
  std::map<std::string, std::string> safetensors;  // "__metadata__" by key
  bool empty() const noexcept { return safetensors.empty(); }
  bool operator==(const TagMetadata&) const = default;
};

// Throws Error(corrupt) with the line for TOML syntax errors, a byte-order
// mark or wrong types; Error(limit_exceeded) for a text over
// limits.max_text_entry_bytes.
TagMetadata parse_tag_metadata(std::string_view toml_text, const Limits& limits);
// The entry's text; parse_tag_metadata gives `metadata` back exactly (any
// UTF-8 key or value, empty ones and control characters included).
std::string write_tag_metadata(const TagMetadata& metadata);

}  // namespace modelzip::format
