#include "cli/formats.hpp"

#include <string>

#include "cli/terminal.hpp"

namespace modelzip::cli {

std::optional<convert::TensorFormat> tensor_format_named(std::string_view name) {
  // Each format's name is its file extension.
  const auto f =
      convert::tensor_format_for_extension(std::filesystem::path("f." + std::string(name)));
  if (f && convert::tensor_format_name(*f) == name) return f;
  return std::nullopt;
}

UsageError unknown_format_option(std::string_view name) {
  return UsageError("unknown --format " + quoted_name(name) +
                    " (tensors: npy npz safetensors btf; embeddings: finalfusion word2vec text "
                    "textdims fasttext floret)");
}

UsageError unknown_extension(const std::filesystem::path& path) {
  return UsageError("cannot tell the format of " + quoted_name(path.string()) +
                    " by its extension (tensors: .npy .npz .safetensors .btf; embeddings: .fifu "
                    ".bin .txt .vec): give --format");
}

}  // namespace modelzip::cli
