#include <doctest/doctest.h>

#include "modelzip/dtype.hpp"

using namespace modelzip;

TEST_CASE("DTypes carry Deeplearning4j's numbers") {
  // From Deeplearning4j's array.fbs (design notes section 1).
  CHECK(static_cast<int>(DType::bool_) == 1);
  CHECK(static_cast<int>(DType::float16) == 3);
  CHECK(static_cast<int>(DType::float32) == 5);
  CHECK(static_cast<int>(DType::float64) == 6);
  CHECK(static_cast<int>(DType::int8) == 7);
  CHECK(static_cast<int>(DType::int64) == 10);
  CHECK(static_cast<int>(DType::uint8) == 11);
  CHECK(static_cast<int>(DType::uint64) == 14);
  CHECK(static_cast<int>(DType::bfloat16) == 17);
  CHECK(static_cast<int>(DType::utf8) == 50);
  // modelzip's own numbers after DL4J's last (FORMAT.md section 6).
  CHECK(static_cast<int>(DType::float8_e4m3fn) == 18);
  CHECK(static_cast<int>(DType::float8_e5m2) == 19);
  CHECK_FALSE(dtype_from_code(0));   // INHERIT
  CHECK_FALSE(dtype_from_code(2));   // FLOAT8
  CHECK_FALSE(dtype_from_code(15));  // QINT8
  CHECK_FALSE(dtype_from_code(51));  // UTF16
}

TEST_CASE("Names and sizes round-trip") {
  for (DType t : kAllDTypes) {
    CHECK(dtype_from_code(static_cast<std::uint32_t>(t)) == t);
    CHECK(dtype_from_name(dtype_name(t)) == t);
  }
  CHECK(dtype_name(DType::utf8) == "string");
  CHECK(dtype_size(DType::bfloat16) == 2);
  CHECK(dtype_size(DType::uint32) == 4);
  CHECK(dtype_size(DType::float64) == 8);
  CHECK(dtype_size(DType::bool_) == 1);
  CHECK(dtype_size(DType::utf8) == 0);
  CHECK_FALSE(dtype_from_name("float128"));
}

TEST_CASE("The 8-bit floats: names, codes, size 1, floating point") {
  CHECK(dtype_name(DType::float8_e4m3fn) == "float8_e4m3fn");
  CHECK(dtype_name(DType::float8_e5m2) == "float8_e5m2");
  CHECK(dtype_from_name("float8_e4m3fn") == DType::float8_e4m3fn);
  CHECK(dtype_from_name("float8_e5m2") == DType::float8_e5m2);
  CHECK(dtype_from_code(18) == DType::float8_e4m3fn);
  CHECK(dtype_from_code(19) == DType::float8_e5m2);
  CHECK(dtype_size(DType::float8_e4m3fn) == 1);
  CHECK(dtype_size(DType::float8_e5m2) == 1);
  CHECK(dtype_is_floating(DType::float8_e4m3fn));
  CHECK(dtype_is_floating(DType::float8_e5m2));
  // Names of other 8-bit formats are not aliases of these.
  CHECK_FALSE(dtype_from_name("float8"));
  CHECK_FALSE(dtype_from_name("float8_e4m3"));
  CHECK_FALSE(dtype_from_name("float8_e4m3fnuz"));
  CHECK_FALSE(dtype_from_name("F8_E4M3"));
  CHECK(dtype_from_code(20) == DType::complex64);
}

TEST_CASE("The MX types: codes 22 and 23, torch's names, one byte, neither floating nor complex") {
  CHECK(static_cast<int>(DType::float8_e8m0fnu) == 22);
  CHECK(static_cast<int>(DType::float4_e2m1fn_x2) == 23);
  CHECK(dtype_from_code(22) == DType::float8_e8m0fnu);
  CHECK(dtype_from_code(23) == DType::float4_e2m1fn_x2);
  CHECK(dtype_name(DType::float8_e8m0fnu) == "float8_e8m0fnu");
  CHECK(dtype_name(DType::float4_e2m1fn_x2) == "float4_e2m1fn_x2");
  CHECK(dtype_from_name("float8_e8m0fnu") == DType::float8_e8m0fnu);
  CHECK(dtype_from_name("float4_e2m1fn_x2") == DType::float4_e2m1fn_x2);
  // ml_dtypes' unpacked float4_e2m1fn (one value per byte) is another layout.
  CHECK_FALSE(dtype_from_name("float4_e2m1fn"));
  CHECK_FALSE(dtype_from_name("F8_E8M0"));
  CHECK_FALSE(dtype_from_name("F4"));
  CHECK(dtype_size(DType::float8_e8m0fnu) == 1);
  CHECK(dtype_size(DType::float4_e2m1fn_x2) == 1);  // a pair of 4-bit values
  for (DType t : {DType::float8_e8m0fnu, DType::float4_e2m1fn_x2}) {
    CHECK_FALSE(dtype_is_floating(t));
    CHECK_FALSE(dtype_is_complex(t));
  }
}

TEST_CASE("The complex types: codes, names, sizes, complex but not floating") {
  CHECK(static_cast<int>(DType::complex64) == 20);
  CHECK(static_cast<int>(DType::complex128) == 21);
  CHECK(dtype_from_code(20) == DType::complex64);
  CHECK(dtype_from_code(21) == DType::complex128);
  CHECK_FALSE(dtype_from_code(24));
  CHECK(dtype_name(DType::complex64) == "complex64");
  CHECK(dtype_name(DType::complex128) == "complex128");
  CHECK(dtype_from_name("complex64") == DType::complex64);
  CHECK(dtype_from_name("complex128") == DType::complex128);
  CHECK_FALSE(dtype_from_name("complex"));     // numpy's alias of complex128 is not a name here
  CHECK_FALSE(dtype_from_name("complex256"));  // numpy's long double pairs: unsupported
  CHECK_FALSE(dtype_from_name("C64"));
  CHECK(dtype_size(DType::complex64) == 8);
  CHECK(dtype_size(DType::complex128) == 16);
  CHECK(dtype_is_complex(DType::complex64));
  CHECK(dtype_is_complex(DType::complex128));
  CHECK_FALSE(dtype_is_floating(DType::complex64));
  CHECK_FALSE(dtype_is_floating(DType::complex128));
  int complex_types = 0;
  for (DType t : kAllDTypes) {
    complex_types += dtype_is_complex(t);
    CHECK_FALSE((dtype_is_complex(t) && dtype_is_floating(t)));
  }
  CHECK(complex_types == 2);
}
