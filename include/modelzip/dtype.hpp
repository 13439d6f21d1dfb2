// Element data types, numbered as Deeplearning4j numbers them (array.fbs), so
// the numbers stored in tensor blobs mean the same thing in both projects.
//
// Only the types listed here are supported; other DL4J numbers (FLOAT8, HALF2,
// QINT8, QINT16, UTF16, UTF32, INHERIT) are rejected as unsupported. The two
// 8-bit floating-point types are modelzip's additions after DL4J's numbers
// (DL4J's FLOAT8 never said which 8-bit format it meant): float8_e4m3fn
// (torch.float8_e4m3fn, safetensors F8_E4M3: 4 exponent bits, bias 7, no
// infinity, NaN only as S.1111.111, largest 448) and float8_e5m2
// (torch.float8_e5m2, safetensors F8_E5M2: IEEE-style, the top byte of a
// binary16). complex64 and complex128 (20, 21) are modelzip's too: each
// element is the real part then the imaginary part, IEEE binary32 or binary64
// little-endian, as numpy, torch and safetensors (C64) lay them out.
//
// The OCP Microscaling (MX) types are modelzip's too (22, 23):
// float8_e8m0fnu (torch.float8_e8m0fnu, safetensors F8_E8M0: an unsigned
// 8-bit exponent, value 2^(bits-127), 0xFF NaN, no zero, no sign; MX block
// scales) and float4_e2m1fn_x2 (torch.float4_e2m1fn_x2, safetensors F4): one
// element is ONE BYTE holding TWO FP4 E2M1 values, the first in the low
// nibble (bits 3..0), the second in the high nibble; the shape counts bytes
// (pairs), as torch's does, so numel is half the number of FP4 values. Each
// E2M1 nibble is sign, 2 exponent bits (bias 1), 1 mantissa bit: the values
// +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}, no infinity, no NaN. Neither counts as
// floating (dtype_is_floating): an E8M0 scale and a packed pair are not
// trainable values. FORMAT.md section 6 has the exact rules.
//
// Thread safety: plain values and pure functions; no shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "modelzip/export.hpp"

namespace modelzip {

enum class DType : std::uint8_t {
  bool_ = 1,
  float16 = 3,
  float32 = 5,
  float64 = 6,
  int8 = 7,
  int16 = 8,
  int32 = 9,
  int64 = 10,
  uint8 = 11,
  uint16 = 12,
  uint32 = 13,
  uint64 = 14,
  bfloat16 = 17,
  float8_e4m3fn = 18,
  float8_e5m2 = 19,
  complex64 = 20,
  complex128 = 21,
  float8_e8m0fnu = 22,
  float4_e2m1fn_x2 = 23,
  utf8 = 50,  // variable-length UTF-8 strings (see Tensor)
};

// Every supported type, in numbering order.
inline constexpr DType kAllDTypes[] = {DType::bool_,
                                       DType::float16,
                                       DType::float32,
                                       DType::float64,
                                       DType::int8,
                                       DType::int16,
                                       DType::int32,
                                       DType::int64,
                                       DType::uint8,
                                       DType::uint16,
                                       DType::uint32,
                                       DType::uint64,
                                       DType::bfloat16,
                                       DType::float8_e4m3fn,
                                       DType::float8_e5m2,
                                       DType::complex64,
                                       DType::complex128,
                                       DType::float8_e8m0fnu,
                                       DType::float4_e2m1fn_x2,
                                       DType::utf8};

// The type with DL4J number `code`, or nullopt when unsupported.
MODELZIP_API std::optional<DType> dtype_from_code(std::uint32_t code) noexcept;

// numpy-style name: "bool", "float16", "bfloat16", "float32", "int64",
// "uint8", ..., "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu",
// "float4_e2m1fn_x2" (torch's names), "complex64", "complex128", and
// "string" for utf8.
MODELZIP_API std::string_view dtype_name(DType type) noexcept;
MODELZIP_API std::optional<DType> dtype_from_name(std::string_view name) noexcept;

// Bytes per element; 0 for utf8 (variable length); 1 for float4_e2m1fn_x2
// (an element is a pair of FP4 values).
MODELZIP_API std::size_t dtype_size(DType type) noexcept;

// Real floating-point types (float16, bfloat16, float32, float64,
// float8_e4m3fn, float8_e5m2); not the complex ones, not the MX types
// (float8_e8m0fnu, float4_e2m1fn_x2).
MODELZIP_API bool dtype_is_floating(DType type) noexcept;

// complex64 and complex128.
MODELZIP_API bool dtype_is_complex(DType type) noexcept;

}  // namespace modelzip
