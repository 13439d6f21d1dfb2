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
