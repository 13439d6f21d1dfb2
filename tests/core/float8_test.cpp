// The float8 decoders of core/float16.hpp against values worked out from the
// format definition (FORMAT.md section 6), not from the decoders themselves.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "core/float16.hpp"

using modelzip::detail::float4_e2m1_to_float;
using modelzip::detail::float8_e4m3fn_to_float;
using modelzip::detail::float8_e5m2_to_float;
using modelzip::detail::float8_e8m0fnu_to_float;

namespace {

float pow2(int e) {
  return std::ldexp(1.0f, e);
}

}  // namespace

TEST_CASE("float8_e4m3fn: spot values from the definition (bias 7, no infinity)") {
  CHECK(float8_e4m3fn_to_float(0x00) == 0.0f);
  CHECK_FALSE(std::signbit(float8_e4m3fn_to_float(0x00)));
  CHECK(float8_e4m3fn_to_float(0x80) == 0.0f);
  CHECK(std::signbit(float8_e4m3fn_to_float(0x80)));
  // Exponent field 0: mantissa * 2^(1 - 7) / 8 = mantissa * 2^-9.
  CHECK(float8_e4m3fn_to_float(0x01) == pow2(-9));
  CHECK(float8_e4m3fn_to_float(0x81) == -pow2(-9));
  CHECK(float8_e4m3fn_to_float(0x07) == 7 * pow2(-9));
  // Exponent field 1, mantissa 0: 2^(1 - 7), the smallest normal number.
  CHECK(float8_e4m3fn_to_float(0x08) == pow2(-6));
  // 0.0111.000: 2^(7 - 7) = 1; 0.0111.100: 1 + 4/8.
  CHECK(float8_e4m3fn_to_float(0x38) == 1.0f);
  CHECK(float8_e4m3fn_to_float(0x3C) == 1.5f);
  CHECK(float8_e4m3fn_to_float(0xB8) == -1.0f);
  // 0.1111.000 is a number (no infinity): 2^8 = 256; 0.1111.110: 256 * 1.75.
  CHECK(float8_e4m3fn_to_float(0x78) == 256.0f);
  CHECK(float8_e4m3fn_to_float(0x7E) == 448.0f);
  CHECK(float8_e4m3fn_to_float(0xFE) == -448.0f);
  CHECK(std::isnan(float8_e4m3fn_to_float(0x7F)));
  CHECK(std::isnan(float8_e4m3fn_to_float(0xFF)));
  int nans = 0, infinities = 0;
  for (int b = 0; b < 256; ++b) {
    const float f = float8_e4m3fn_to_float(static_cast<std::uint8_t>(b));
    nans += std::isnan(f);
    infinities += std::isinf(f);
  }
  CHECK(nans == 2);
  CHECK(infinities == 0);
}

TEST_CASE("float8_e5m2: spot values from the definition (bias 15, IEEE rules)") {
  CHECK(float8_e5m2_to_float(0x00) == 0.0f);
  CHECK_FALSE(std::signbit(float8_e5m2_to_float(0x00)));
  CHECK(std::signbit(float8_e5m2_to_float(0x80)));
  CHECK(float8_e5m2_to_float(0x80) == 0.0f);
  // Exponent field 0: mantissa * 2^(1 - 15) / 4 = mantissa * 2^-16.
  CHECK(float8_e5m2_to_float(0x01) == pow2(-16));
  CHECK(float8_e5m2_to_float(0x03) == 3 * pow2(-16));
  CHECK(float8_e5m2_to_float(0x04) == pow2(-14));  // smallest normal
  // 0.01111.00: 2^(15 - 15) = 1; 0.01111.10: 1.5; 1.10000.00: -2.
  CHECK(float8_e5m2_to_float(0x3C) == 1.0f);
  CHECK(float8_e5m2_to_float(0x3E) == 1.5f);
  CHECK(float8_e5m2_to_float(0xC0) == -2.0f);
  // 0.11110.11: 2^15 * 1.75, the largest finite value.
  CHECK(float8_e5m2_to_float(0x7B) == 57344.0f);
  CHECK(float8_e5m2_to_float(0xFB) == -57344.0f);
  CHECK(float8_e5m2_to_float(0x7C) == INFINITY);
  CHECK(float8_e5m2_to_float(0xFC) == -INFINITY);
  for (std::uint8_t b : {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF})
    CHECK(std::isnan(float8_e5m2_to_float(b)));
  int nans = 0, infinities = 0;
  for (int b = 0; b < 256; ++b) {
    const float f = float8_e5m2_to_float(static_cast<std::uint8_t>(b));
    nans += std::isnan(f);
    infinities += std::isinf(f);
  }
  CHECK(nans == 6);
  CHECK(infinities == 2);
}

TEST_CASE("float8: the positive finite patterns increase, the negative ones mirror them") {
  // e4m3fn: 0x00..0x7E (127 patterns); e5m2: 0x00..0x7B (124 patterns).
  struct Format {
    float (*decode)(std::uint8_t);
    int largest;
  };
  for (Format f : {Format{float8_e4m3fn_to_float, 0x7E}, Format{float8_e5m2_to_float, 0x7B}}) {
    CAPTURE(f.largest);
    for (int b = 1; b <= f.largest; ++b) {
      CAPTURE(b);
      REQUIRE(f.decode(static_cast<std::uint8_t>(b)) > f.decode(static_cast<std::uint8_t>(b - 1)));
    }
    for (int b = 0; b <= f.largest; ++b)
      REQUIRE(f.decode(static_cast<std::uint8_t>(b | 0x80)) ==
              -f.decode(static_cast<std::uint8_t>(b)));
  }
}

TEST_CASE("float8_e8m0fnu: 2^(e - 127), 0xFF NaN, no zero, no sign") {
  CHECK(float8_e8m0fnu_to_float(0x7F) == 1.0f);
  CHECK(float8_e8m0fnu_to_float(0x80) == 2.0f);
  CHECK(float8_e8m0fnu_to_float(0x7E) == 0.5f);
  CHECK(float8_e8m0fnu_to_float(0xFE) == pow2(127));
  CHECK(float8_e8m0fnu_to_float(0x01) == pow2(-126));
  CHECK(float8_e8m0fnu_to_float(0x00) == pow2(-127));  // a float subnormal, not zero
  CHECK(float8_e8m0fnu_to_float(0x00) > 0.0f);
  CHECK(std::isnan(float8_e8m0fnu_to_float(0xFF)));
  for (int b = 0; b < 255; ++b) {
    INFO("bits " << b);
    CHECK(float8_e8m0fnu_to_float(static_cast<std::uint8_t>(b)) == pow2(b - 127));
  }
}

TEST_CASE("float4 e2m1: the sixteen nibbles, sign in bit 3, bias 1, no infinity or NaN") {
  // Magnitudes 0, 0.5 (subnormal 0.01 -> 1 * 2^-1), 1, 1.5, 2, 3, 4, 6.
  const float want[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                          -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  for (int n = 0; n < 16; ++n) {
    INFO("nibble " << n);
    const float got = float4_e2m1_to_float(static_cast<std::uint8_t>(n));
    CHECK(got == want[n]);
    CHECK(std::signbit(got) == (n >= 8));
  }
  // Only the low nibble counts.
  CHECK(float4_e2m1_to_float(0x97) == 6.0f);
  CHECK(float4_e2m1_to_float(0x79) == -0.5f);
}
