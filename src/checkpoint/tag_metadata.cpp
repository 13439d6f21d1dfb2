#include "checkpoint/tag_metadata.hpp"
#include "core/printable.hpp"

#include "checkpoint/archive_state.hpp"
#include "core/suggestions.hpp"
#include "core/utf8.hpp"
#include "modelzip/error.hpp"
#include "modelzip/tag_metadata.hpp"

namespace modelzip::checkpoint {

std::string resolve_tag(const Archive& archive, std::string_view tag) {
  if (tag.empty()) return archive.newest_tag();
  if (auto found = archive.find_tag(tag)) return *found;
  throw Error(ErrorCode::not_found,
              "no such tag" + modelzip::detail::did_you_mean(tag, archive.tags()),
              ErrorContext{.archive = archive.name(), .tag = std::string(tag)});
}

format::TagMetadata read_tag_metadata(const Archive& archive, std::string_view tag) {
  const std::string resolved = resolve_tag(archive, tag);
  const std::string entry = resolved + "/" + std::string(format::kTagMetadataFile);
  if (!archive.has_entry(entry)) return {};
  const Bytes text = archive.entry(entry, ReadMode::copy);
  try {
    return format::parse_tag_metadata(text.as_string_view(), ArchiveState(archive).limits());
  } catch (const Error& e) {
    throw e.with_context({.archive = archive.name(), .entry = entry, .tag = resolved});
  }
}

std::string tag_metadata_text(const format::TagMetadata& metadata) {
  for (const auto* table : {&metadata.safetensors, &metadata.torch})
    for (const auto& [key, value] : *table)
      if (!modelzip::detail::utf8_valid(key) || !modelzip::detail::utf8_valid(value))
        throw Error(ErrorCode::invalid_argument,
                    "tag metadata: " +
                        (modelzip::detail::utf8_valid(key)
                             ? "the value of " + modelzip::detail::quote_name(key)
                             : std::string("a key")) +
                        " is not UTF-8 text");
  return format::write_tag_metadata(metadata);
}

void stage_tag_metadata(NewTag& contents, const format::TagMetadata& metadata) {
  if (metadata.empty()) return;
  contents.set_entry(std::string(format::kTagMetadataFile),
                     Bytes::copy_of(tag_metadata_text(metadata)), Compression::deflate);
}

}  // namespace modelzip::checkpoint

namespace modelzip {

std::map<std::string, std::string> tag_metadata(const Archive& archive, std::string_view tag) {
  return checkpoint::read_tag_metadata(archive, tag).safetensors;
}

void set_tag_metadata(NewTag& contents, const std::map<std::string, std::string>& metadata) {
  checkpoint::stage_tag_metadata(contents, {.safetensors = metadata});
}

}  // namespace modelzip
