// <tag>/metadata.toml of an Archive and a NewTag, whole (both of its tables:
// format/tag_metadata.hpp): what the public tag_metadata/set_tag_metadata
// (modelzip/tag_metadata.hpp), the converters and the Python package read
// and stage.
//
// Thread safety: as the Archive and NewTag given.
#pragma once

#include <string>
#include <string_view>

#include "format/tag_metadata.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/writer.hpp"

namespace modelzip::checkpoint {

// The tag `tag` ("" = the newest) resolved to its stored spelling. Throws
// Error(not_found) naming the archive and tag for a missing one.
std::string resolve_tag(const Archive& archive, std::string_view tag);

// The entry of `tag` ("" = the newest) of `archive`, parsed; empty without
// one. Errors as modelzip::tag_metadata.
format::TagMetadata read_tag_metadata(const Archive& archive, std::string_view tag);

// The text of <tag>/metadata.toml holding `metadata`. Throws
// Error(invalid_argument) naming the key for a key or value that is not
// UTF-8.
std::string tag_metadata_text(const format::TagMetadata& metadata);

// Stages `metadata` as <tag>/metadata.toml of `contents` (deflated; nothing
// when it is empty). Errors as tag_metadata_text.
void stage_tag_metadata(NewTag& contents, const format::TagMetadata& metadata);

}  // namespace modelzip::checkpoint
