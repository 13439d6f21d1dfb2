#include "convert/kept_metadata.hpp"

#include "checkpoint/tag_metadata.hpp"
#include "core/printable.hpp"
#include "modelzip/error.hpp"

namespace modelzip::convert::detail {

void merge_file_metadata(StringMap& into, const TensorFile& file,
                         const std::filesystem::path& path) {
  for (const auto& [key, value] : file.metadata) {
    auto [at, added] = into.emplace(key, value);
    if (!added && at->second != value)
      throw Error(ErrorCode::invalid_argument,
                  "safetensors metadata " + modelzip::detail::quote_name(key) +
                      " differs from an earlier file's (" +
                      modelzip::detail::quote_name(at->second) + " there, " +
                      modelzip::detail::quote_name(value) + " here)",
                  ErrorContext{.archive = path.string()});
  }
}

void keep_metadata(NewTag& contents, const StringMap& safetensors) {
  checkpoint::stage_tag_metadata(contents, {.safetensors = safetensors});
}

StringMap kept_safetensors_metadata(const Archive& archive, std::string_view tag) {
  return checkpoint::read_tag_metadata(archive, tag).safetensors;
}

}  // namespace modelzip::convert::detail
