// A tag's free-form metadata: string -> string pairs, as safetensors'
// "__metadata__" (`save_file(..., metadata=)`, `safe_open(...).metadata()`).
// Stored in the tag's <tag>/metadata.toml, table `safetensors`
// (schemas/FORMAT.md section 3.1); `modelzip import` keeps the
// "__metadata__" of imported safetensors files there, an export to
// safetensors writes the pairs back, `modelzip meta ARCHIVE --tag T` prints
// them.
//
// Thread safety: as the Archive and NewTag given.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "modelzip/archive.hpp"
#include "modelzip/export.hpp"
#include "modelzip/writer.hpp"

namespace modelzip {

// The free-form metadata of `tag` ("" = the newest; compared ignoring ASCII
// case) of `archive`; empty when the tag has none. Throws Error(not_found)
// for a tag the archive does not have, Error(corrupt) naming the entry and
// line for a malformed <tag>/metadata.toml.
MODELZIP_API std::map<std::string, std::string> tag_metadata(const Archive& archive,
                                                             std::string_view tag = {});

// Stages `metadata` as the free-form metadata of the tag `contents` makes
// (its <tag>/metadata.toml, replacing one staged before; nothing for an
// empty map). Keys and values are any UTF-8 text, empty ones included;
// throws Error(invalid_argument) naming the key for one that is not UTF-8.
MODELZIP_API void set_tag_metadata(NewTag& contents,
                                   const std::map<std::string, std::string>& metadata);

}  // namespace modelzip
