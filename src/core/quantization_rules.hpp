// The validation rules of quantized tensors (FORMAT.md section 6.1), shared
// by Tensor::quantized (Error(invalid_argument) for callers) and the tensor
// blob reader (which re-throws them as Error(corrupt) naming the entry).
// Messages name the header field ("quantization.axis", "quantization.scales[3]").
#pragma once

#include <cstdint>
#include <span>

#include "modelzip/bytes.hpp"
#include "modelzip/quantization.hpp"

namespace modelzip::detail {

// The types a quantized tensor may stand for (section 6.1), which are also
// the types quantize() takes and dequantize() gives: float16, bfloat16,
// float32, float64. Not the 8-bit floats: the format keeps quantization for
// the wider types, whose size int8 codes at least halve.
constexpr bool quantizable_type(DType type) noexcept {
  return type == DType::float16 || type == DType::bfloat16 || type == DType::float32 ||
         type == DType::float64;
}

// Byte lengths the segments must have.
struct QuantLengths {
  std::uint64_t values = 0, scales = 0, zero_points = 0;
};

// Every rule that needs no data: the original type is floating point, the
// scheme/storage pair is allowed, the per-tensor scale is positive and
// finite and its zero point in the storage range, the axis is inside the
// shape, the block size is >= 1, the scale type fits the scheme. Returns the
// lengths `values`, `scales` and `zero_points` must have (the caller
// compares them: `q.scales` and `q.zero_points` are not looked at). Throws
// Error(invalid_argument).
QuantLengths check_quantization_header(const Quantization& q, DType original,
                                       std::span<const std::int64_t> shape);

// The rules on data: every scale positive and finite, every zero point in the
// storage range, the unused high nibble of an odd int4 tensor 0. Call after
// check_quantization_header() accepted the lengths. Throws
// Error(invalid_argument).
void check_quantization_data(const Quantization& q, const Bytes& values, std::uint64_t numel);

}  // namespace modelzip::detail
