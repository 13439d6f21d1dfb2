// Conversions of IEEE binary16, bfloat16, the float8 formats' and FP4 E2M1's
// bit patterns to float (exact: every value of these formats is a float).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace modelzip::detail {

inline float bfloat16_to_float(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

inline float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1F;
  std::uint32_t mantissa = h & 0x3FF;
  std::uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mantissa <<= 1;
      } while ((mantissa & 0x400) == 0);
      bits = sign | static_cast<std::uint32_t>(127 - 15 - e) << 23 | (mantissa & 0x3FF) << 13;
    }
  } else if (exponent == 0x1F) {
    bits = sign | 0x7F800000u | mantissa << 13;  // inf / nan
  } else {
    bits = sign | (exponent + 127 - 15) << 23 | mantissa << 13;
  }
  return std::bit_cast<float>(bits);
}

// float8_e5m2 is binary16 with the low 8 mantissa bits cut off.
inline float float8_e5m2_to_float(std::uint8_t bits) noexcept {
  return half_to_float(static_cast<std::uint16_t>(bits << 8));
}

// float8_e4m3fn: sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0
// is subnormal; no infinity; S.1111.111 is NaN, every other pattern a number
// (S.1111.110 = 448).
inline float float8_e4m3fn_to_float(std::uint8_t bits) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x80) << 24;
  const std::uint32_t exponent = (bits >> 3) & 0xF;
  const std::uint32_t mantissa = bits & 0x7;
  if (exponent == 0xF && mantissa == 0x7) return std::bit_cast<float>(sign | 0x7FC00000u);
  if (exponent == 0) {  // mantissa * 2^-9, computed exactly in float
    const float magnitude = static_cast<float>(mantissa) / 512.0f;
    return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | (exponent + 127 - 7) << 23 | mantissa << 20);
}

// float8_e8m0fnu: an unsigned exponent, value 2^(bits - 127); 0xFF is NaN;
// no zero, no sign. 0x00 (2^-127) is a float subnormal, exact.
inline float float8_e8m0fnu_to_float(std::uint8_t bits) noexcept {
  if (bits == 0xFF) return std::bit_cast<float>(0x7FC00000u);
  if (bits == 0) return std::bit_cast<float>(0x00400000u);  // 2^-127
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 23);
}

// One FP4 E2M1 value (the low 4 bits of `nibble`): sign, 2 exponent bits
// (bias 1), 1 mantissa bit; exponent 0 is subnormal (0 or 0.5). Values
// +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}; no infinity, no NaN.
inline float float4_e2m1_to_float(std::uint8_t nibble) noexcept {
  constexpr float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = kMagnitude[nibble & 0x7];
  return (nibble & 0x8) ? -m : m;
}

// Value i of float4_e2m1fn_x2 data (`pairs`: one byte per pair of FP4
// values, FORMAT.md section 6): the low nibble of byte i / 2 for even i,
// the high nibble for odd i. Requires i / 2 < the bytes there.
inline float float4_e2m1fn_x2_value(const std::byte* pairs, std::uint64_t i) noexcept {
  const auto pair = static_cast<std::uint8_t>(pairs[i / 2]);
  return float4_e2m1_to_float(i % 2 == 0 ? pair & 0x0F : pair >> 4);
}

}  // namespace modelzip::detail

#include <cmath>

namespace modelzip::detail {

// The binary floating-point format with `ebits` exponent and `mbits`
// mantissa bits nearest to `x` (round to nearest, ties to even; overflow to
// infinity; NaN to a quiet NaN), as its bit pattern. Exact: `x` is rounded
// once, never through float.
inline std::uint16_t round_to_small_float(double x, int ebits, int mbits) noexcept {
  const std::uint32_t sign = std::signbit(x) ? 1u << (ebits + mbits) : 0u;
  const std::uint32_t exp_all = (1u << ebits) - 1;
  if (std::isnan(x)) return static_cast<std::uint16_t>(sign | exp_all << mbits | 1u << (mbits - 1));
  const int bias = (1 << (ebits - 1)) - 1;
  const int emin = 1 - bias;
  double a = std::fabs(x);
  if (a >= std::ldexp(2.0 - std::ldexp(1.0, -(mbits + 1)), bias))
    return static_cast<std::uint16_t>(sign | exp_all << mbits);
  if (a < std::ldexp(1.0, emin)) {  // subnormal (the carry into the exponent works by itself)
    auto m = static_cast<std::uint32_t>(std::nearbyint(std::ldexp(a, mbits - emin)));
    return static_cast<std::uint16_t>(sign | m);
  }
  int e2 = 0;
  (void)std::frexp(a, &e2);
  int e = e2 - 1;
  auto m = static_cast<std::uint32_t>(std::nearbyint((std::ldexp(a, -e) - 1.0) * (1u << mbits)));
  if (m == (1u << mbits)) {
    m = 0;
    ++e;
  }
  if (e > bias) return static_cast<std::uint16_t>(sign | exp_all << mbits);
  return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(e + bias) << mbits | m);
}

inline std::uint16_t double_to_half(double x) noexcept {
  return round_to_small_float(x, 5, 10);
}
inline std::uint16_t double_to_bfloat16(double x) noexcept {
  return round_to_small_float(x, 8, 7);
}

}  // namespace modelzip::detail
