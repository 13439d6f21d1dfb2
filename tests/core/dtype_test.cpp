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
