// The metadata of imported tensor files that a tag keeps for its exports:
// safetensors' "__metadata__" in <tag>/metadata.toml (format/tag_metadata.hpp,
// FORMAT.md section 3.1). Used by `modelzip import`/`export` and Python's
// import_tensor_files/export_tensor_file.
//
// Thread safety: as the Archive and NewTag given.
#pragma once

#include <filesystem>
#include <string_view>

#include "modelzip/archive.hpp"
#include "modelzip/convert.hpp"
#include "modelzip/writer.hpp"

namespace modelzip::convert::detail {

// Adds the "__metadata__" of `file`, read from `path`, to `into`. Throws
// Error(invalid_argument) naming `path` and the key when `into` has the key
// with another value (two imported files that disagree).
void merge_file_metadata(StringMap& into, const TensorFile& file,
                         const std::filesystem::path& path);

// Stages <tag>/metadata.toml in `contents` (nothing when `safetensors` is
// empty).
void keep_metadata(NewTag& contents, const StringMap& safetensors);

// The safetensors metadata kept with `tag` ("" = the newest) of `archive`;
// empty when it has none. Throws Error(corrupt) naming the entry and line for
// a malformed one, Error(not_found) for a tag `archive` does not have.
StringMap kept_safetensors_metadata(const Archive& archive, std::string_view tag);

}  // namespace modelzip::convert::detail
