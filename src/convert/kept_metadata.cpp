#include "convert/kept_metadata.hpp"

#include "checkpoint/archive_state.hpp"
#include "core/suggestions.hpp"
#include "format/tag_metadata.hpp"
#include "modelzip/error.hpp"

namespace modelzip::convert::detail {

void merge_file_metadata(StringMap& into, const TensorFile& file,
                         const std::filesystem::path& path) {
  for (const auto& [key, value] : file.metadata) {
    auto [at, added] = into.emplace(key, value);
    if (!added && at->second != value)
      throw Error(ErrorCode::invalid_argument,
                  "safetensors metadata '" + key + "' differs from an earlier file's ('" +
                      at->second + "' there, '" + value + "' here)",
                  ErrorContext{.archive = path.string()});
  }
}

void keep_metadata(NewTag& contents, const StringMap& safetensors) {
  if (safetensors.empty()) return;
  contents.set_entry(std::string(format::kTagMetadataFile),
                     Bytes::copy_of(format::write_tag_metadata({.safetensors = safetensors})),
                     Compression::deflate);
}

StringMap kept_safetensors_metadata(const Archive& archive, std::string_view tag) {
  if (!tag.empty() && !archive.find_tag(tag))
    throw Error(ErrorCode::not_found,
                "no such tag" + modelzip::detail::did_you_mean(tag, archive.tags()),
                ErrorContext{.archive = archive.name(), .tag = std::string(tag)});
  const std::string resolved = tag.empty() ? archive.newest_tag() : *archive.find_tag(tag);
  const std::string entry = resolved + "/" + std::string(format::kTagMetadataFile);
  if (!archive.has_entry(entry)) return {};
  const Bytes text = archive.entry(entry, ReadMode::copy);
  try {
    return format::parse_tag_metadata(text.as_string_view(),
                                      checkpoint::ArchiveState(archive).limits())
        .safetensors;
  } catch (const Error& e) {
    throw e.with_context({.archive = archive.name(), .entry = entry, .tag = resolved});
  }
}

}  // namespace modelzip::convert::detail
