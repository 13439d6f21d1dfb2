// The file formats import reads and export writes, by --format name and by
// extension, and the one way both commands refuse a name or an extension
// that tells none. The extensions are the library's tables
// (convert::tensor_format_for_extension,
// finalfusion::embedding_format_for_extension).
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>

#include "cli/args.hpp"
#include "modelzip/convert.hpp"

namespace modelzip::cli {

// The tensor format --format `name` names ("npy", "npz", "safetensors",
// "btf", spelled as convert::tensor_format_name spells them), or nullopt.
std::optional<convert::TensorFormat> tensor_format_named(std::string_view name);

// The UsageError for a --format that names no format.
UsageError unknown_format_option(std::string_view name);

// The UsageError for a file whose extension tells no format (nor, for
// import, its content).
UsageError unknown_extension(const std::filesystem::path& path);

}  // namespace modelzip::cli
