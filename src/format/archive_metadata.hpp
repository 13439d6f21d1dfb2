// modelzip.toml: the archive-level metadata entry (TOML, via toml++).
//
//   format_version = 1          # required integer; readers reject newer ones
//   writer = "modelzip 0.1.0"   # optional
//   [model]                     # optional table, every key optional
//   name = "..."  version = "..."  quantization = "..."  description = "..."
//
// Unknown keys are ignored, so later versions can add keys without breaking
// readers.
#pragma once

#include <string>
#include <string_view>

#include "modelzip/limits.hpp"
#include "modelzip/metadata.hpp"

namespace modelzip::format {

inline constexpr std::string_view kMetadataEntry = "modelzip.toml";
inline constexpr std::string_view kTagsEntry = "tags.txt";

// Throws Error(corrupt) with the line for TOML syntax errors or wrong types,
// Error(unsupported) for a newer format version.
Metadata parse_metadata(std::string_view toml_text, const Limits& limits);
// Throws Error(invalid_argument) naming the key when a value is not valid
// UTF-8 (TOML strings are Unicode: such bytes would not read back as given).
void check_metadata(const Metadata& metadata);
// The entry's text; throws as check_metadata does.
std::string write_metadata(const Metadata& metadata);

}  // namespace modelzip::format
