#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include "core/byte_swap.hpp"
#include "modelzip/bytes.hpp"

using namespace modelzip;

namespace {

std::string swapped(std::string_view in, std::size_t unit) {
  auto span = std::as_bytes(std::span(in.data(), in.size()));
  return std::string(detail::byteswapped(span, unit).as_string_view());
}

}  // namespace

TEST_CASE("byteswapped reverses every unit") {
  const std::string_view in("\x01\x02\x03\x04\x05\x06\x07\x08", 8);
  CHECK(swapped(in, 4) == std::string("\x04\x03\x02\x01\x08\x07\x06\x05", 8));
  CHECK(swapped(in, 2) == std::string("\x02\x01\x04\x03\x06\x05\x08\x07", 8));
  CHECK(swapped(in, 8) == std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8));
  CHECK(swapped(in, 1) == std::string(in));
  CHECK(swapped({}, 4).empty());
}

TEST_CASE("Byte-order units: complex parts are swapped each on its own") {
  CHECK(detail::byte_swap_unit(DType::float32) == 4);
  CHECK(detail::byte_swap_unit(DType::float64) == 8);
  CHECK(detail::byte_swap_unit(DType::bfloat16) == 2);
  CHECK(detail::byte_swap_unit(DType::uint8) == 1);
  CHECK(detail::byte_swap_unit(DType::utf8) == 1);
  CHECK(detail::byte_swap_unit(DType::complex64) == 4);
  CHECK(detail::byte_swap_unit(DType::complex128) == 8);
  // complex64 1.0 + 2.0i big-endian: 3F800000 40000000 -> little-endian parts.
  const std::string_view big("\x3F\x80\x00\x00\x40\x00\x00\x00", 8);
  CHECK(swapped(big, detail::byte_swap_unit(DType::complex64)) ==
        std::string("\x00\x00\x80\x3F\x00\x00\x00\x40", 8));
}
