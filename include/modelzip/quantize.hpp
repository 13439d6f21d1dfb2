// Quantizing: floating-point tensors to quantized ones (modelzip/quantization.hpp),
// and a whole tag of an archive to a new tag in one append.
//
// Recipes (QuantizeRecipe: the four `modelzip quantize --scheme` offers),
// each a quantization scheme of the format (QuantScheme, FORMAT.md 6.1)
// with its storage and parameters:
//   int8-per-tensor   affine_per_tensor, int8: the range [min(x, 0), max(x, 0)]
//                     mapped onto [-128, 127]: scale = (hi - lo) / 255,
//                     zero_point = -128 - round(lo / scale) (clamped to the range)
//   int8-per-channel  affine_per_axis on axis 0, int8, the same per channel
//   int8-block32      block_symmetric, int8, 32 elements per block
//   int4-block32      block_symmetric, int4, 32 elements per block
// Blocks: rows are the dimensions from axis 1 on (axis 0 for rank 1), so a
// convolution kernel [out, in, kh, kw] has rows of in*kh*kw elements; a
// block's scale is the smallest float16 (float32 for the whole tensor when a
// scale falls outside float16's normal range) >= max|x| / 127 (int8) or / 7
// (int4), and q = round(x / scale) (half away from zero); an all-zero block
// has scale 1. Affine: q = clamp(round(x / scale) + zero_point).
// Every element then dequantizes within half a quantization step
// (scale / 2) of its original value, before rounding to the original type.
//
// Thread safety: free functions without shared state.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "modelzip/archive.hpp"
#include "modelzip/export.hpp"
#include "modelzip/progress.hpp"
#include "modelzip/tensor.hpp"

namespace modelzip {

// A recipe of quantize() and quantize_tag(): which QuantScheme
// (modelzip/quantization.hpp, what a quantized tensor records), storage and
// block size they make (the table above).
enum class QuantizeRecipe : std::uint8_t {
  int8_per_tensor,
  int8_per_channel,
  int8_block32,
  int4_block32
};

// "int8-per-tensor", "int8-per-channel", "int8-block32", "int4-block32".
MODELZIP_API std::string_view quantize_recipe_name(QuantizeRecipe recipe) noexcept;
MODELZIP_API std::optional<QuantizeRecipe> quantize_recipe_from_name(
    std::string_view name) noexcept;

#ifndef MODELZIP_NO_DEPRECATED
// The spellings of 0.1, removed in 0.3 (docs/cpp.md, "Changes in 0.2"):
// QuantizeScheme read like QuantScheme, the format's scheme.
using QuantizeScheme [[deprecated("use QuantizeRecipe")]] = QuantizeRecipe;
[[deprecated("use quantize_recipe_name")]] inline std::string_view quantize_scheme_name(
    QuantizeRecipe recipe) noexcept {
  return quantize_recipe_name(recipe);
}
[[deprecated("use quantize_recipe_from_name")]] inline std::optional<QuantizeRecipe>
quantize_scheme_from_name(std::string_view name) noexcept {
  return quantize_recipe_from_name(name);
}
#endif

// Quantizes a dense float16, bfloat16, float32 or float64 tensor of rank >= 1
// (int8-per-tensor also rank 0). Throws Error(invalid_argument) for another
// tensor (8-bit floats included: FORMAT.md section 6.1), or when an element
// is NaN or infinite (naming the element index).
MODELZIP_API Tensor quantize(const Tensor& tensor, QuantizeRecipe recipe);

struct MODELZIP_API QuantizeOptions {
  // The recipe (named `scheme` as `modelzip quantize --scheme` and Python's
  // quantize_tag(scheme=...) name it).
  QuantizeRecipe scheme = QuantizeRecipe::int8_per_channel;
  // Shell-style globs (fnmatch without flags: `*` also matches `/` and `.`)
  // naming the parameters to quantize. Empty: the default selection below.
  // A glob that matches no parameter of the source tag is an error.
  std::vector<std::string> params{};
  // Default selection: dense float16/bfloat16/float32/float64 tensors of
  // rank >= 2 with at least `min_elements` elements whose name contains none
  // of "bias", "norm", "embed" (ASCII case-insensitive). Never finalfusion
  // embeddings, integer, 8-bit float, string, sparse or already quantized
  // tensors. A parameter named by a glob is quantized whatever its name, rank
  // or size (it must still be a dense float16/bfloat16/float32/float64 tensor).
  std::uint64_t min_elements = 1024;
  bool durable = true;  // WriterOptions::durable
  // Hears of the source bytes quantized, then is asked again during the
  // commit with the last report (bytes_done == bytes_total); returning false
  // cancels (the archive is unchanged).
  ProgressCallback progress{};
};

// Whether the default selection quantizes `param` (see QuantizeOptions).
MODELZIP_API bool quantize_by_default(const ParamInfo& param, std::uint64_t min_elements);

struct MODELZIP_API QuantizeResult {
  std::vector<std::string> quantized{};   // parameters stored quantized, in params.txt order
  std::vector<std::string> referenced{};  // parameters written as references to the source tag
  std::uint64_t source_bytes = 0;     // data bytes of the quantized parameters in the source tag
  std::uint64_t quantized_bytes = 0;  // their data bytes now (integers + scales + zero points)
  std::uint64_t bytes_written = 0;    // bytes the commit wrote (Writer::Stats::bytes_written)
  bool appended = false;              // committed by the append path
};

// Creates tag `new_tag` in the archive at `path` from tag `from_tag` in one
// commit (an append when the archive is in the append layout): the selected
// parameters quantized with options.scheme, every other parameter (and
// every updater state) a reference to the blob the source tag uses (never
// a copy). The source tag's graph.fb and trainingConfig.fb are not carried
// over. An http://, https:// or s3:// `path` is refused before anything is
// fetched: Error(unsupported) "remote archives are read-only: URL", as
// Writer::open. Throws Error(not_found) for a missing tag,
// Error(already_exists) for an existing `new_tag`, Error(invalid_argument)
// for a glob that matches nothing or names a parameter that cannot be
// quantized.
MODELZIP_API QuantizeResult quantize_tag(const std::filesystem::path& path,
                                         std::string_view from_tag, std::string new_tag,
                                         const QuantizeOptions& options = {});

}  // namespace modelzip
