// Quantization: how the integers of a quantized tensor stand for the values
// of its original floating-point type (FORMAT.md section 6.1).
//
// A quantized Tensor (Layout::quantized) has dtype() = the original type
// (float16, bfloat16, float32 or float64), shape() = the original shape,
// values() = the stored integers (one byte per element for int8/uint8, two
// elements per byte for int4) and quantization() = this description.
//
//   affine_per_tensor  x = (q - zero_point) * scale
//   affine_per_axis    x = (q - zero_points[c]) * scales[c], c = the
//                      element's index along `axis`
//   block_symmetric    x = q * scales[r * blocks_per_row + b]; a row is the
//                      row-major run of dimensions axis..rank-1 (row_length
//                      elements), cut into blocks of block_size elements
//                      (the last block of a row may be shorter); r is the
//                      row and b the block within it
//
// The arithmetic is done in float64 and rounded once to the output type
// (round to nearest, ties to even). Storage: affine schemes use int8 or
// uint8, block_symmetric int8 or int4 (element 2k in the low nibble of byte
// k, element 2k+1 in the high nibble; two's complement, [-8, 7]; for an odd
// element count the last high nibble is 0).
//
// Thread safety: plain values; Bytes members share immutable buffers.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "modelzip/bytes.hpp"
#include "modelzip/dtype.hpp"
#include "modelzip/export.hpp"

namespace modelzip {

// How a quantized tensor maps its integers to values, as the format records
// it (FORMAT.md 6.1). What quantize() makes of a tensor is chosen by a
// QuantizeRecipe (modelzip/quantize.hpp), which names one of these.
enum class QuantScheme : std::uint8_t {
  affine_per_tensor = 0,
  affine_per_axis = 1,
  block_symmetric = 2
};
enum class QuantStorage : std::uint8_t { int8 = 0, uint8 = 1, int4 = 2 };

// "affine-per-tensor", "affine-per-axis", "block-symmetric".
MODELZIP_API std::string_view quant_scheme_name(QuantScheme scheme) noexcept;
// "int8", "uint8", "int4".
MODELZIP_API std::string_view quant_storage_name(QuantStorage storage) noexcept;
MODELZIP_API unsigned quant_storage_bits(QuantStorage storage) noexcept;  // 8 or 4
// Smallest and largest storable integer: [-128, 127], [0, 255], [-8, 7].
MODELZIP_API std::int64_t quant_storage_min(QuantStorage storage) noexcept;
MODELZIP_API std::int64_t quant_storage_max(QuantStorage storage) noexcept;
// Bytes of `values` for `numel` elements: numel (8-bit) or ceil(numel / 2).
MODELZIP_API std::uint64_t quant_values_bytes(QuantStorage storage, std::uint64_t numel) noexcept;

struct MODELZIP_API Quantization {
  QuantScheme scheme = QuantScheme::affine_per_tensor;
  QuantStorage storage = QuantStorage::int8;
  // affine_per_tensor: the scale (> 0, finite) and zero point (in the
  // storage range).
  double scale = 1.0;
  std::int64_t zero_point = 0;
  // affine_per_axis: the channel axis; block_symmetric: where rows start.
  // 0 <= axis < rank.
  std::int64_t axis = 0;
  // block_symmetric: elements per block, >= 1.
  std::uint64_t block_size = 0;
  // Type of the `scales` elements: float64 (affine_per_axis), float16 or
  // float32 (block_symmetric). Unused by affine_per_tensor.
  DType scale_dtype = DType::float64;
  // Little-endian arrays. affine_per_axis: shape[axis] scales (float64) and
  // shape[axis] zero points (int64). block_symmetric: one scale per block
  // (scale_dtype), no zero points. Empty for affine_per_tensor. In a
  // ParamInfo (header only, no data read) both are empty.
  Bytes scales{};
  Bytes zero_points{};

  // The i-th scale / zero point, whatever the scale type (no alignment
  // needed). Throws Error(invalid_argument) when i is out of range.
  double scale_at(std::uint64_t i) const;
  std::int64_t zero_point_at(std::uint64_t i) const;
  // Number of scales the scheme needs for `shape` (1 for affine_per_tensor).
  // Throws Error(invalid_argument) when axis or block size do not fit it.
  std::uint64_t scale_count(std::span<const std::int64_t> shape) const;
  // Elements per row: the product of shape[axis..] (block_symmetric rows).
  std::uint64_t row_length(std::span<const std::int64_t> shape) const;
  // The scale that applies to row-major element `index` of a tensor of
  // `shape` (one quantization step there; values dequantize within half of
  // it). Throws Error(invalid_argument) when index or parameters do not fit.
  double element_scale(std::span<const std::int64_t> shape, std::uint64_t index) const;

  // Same scheme, storage, parameters and scale/zero point bytes.
  bool operator==(const Quantization& other) const;
};

// The stored integer at row-major `index` of `values` (unchecked: index <
// numel, values of quant_values_bytes() bytes).
inline std::int32_t quant_value_at(QuantStorage storage, const std::byte* values,
                                   std::uint64_t index) noexcept {
  switch (storage) {
    case QuantStorage::int8:
      return static_cast<std::int8_t>(values[index]);
    case QuantStorage::uint8:
      return static_cast<std::uint8_t>(values[index]);
    case QuantStorage::int4: {
      auto byte = static_cast<std::uint8_t>(values[index / 2]);
      std::int32_t nibble = (index % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
      return nibble >= 8 ? nibble - 16 : nibble;
    }
  }
  return 0;
}

}  // namespace modelzip
