#include "modelzip/dtype.hpp"

namespace modelzip {

std::optional<DType> dtype_from_code(std::uint32_t code) noexcept {
  for (DType t : kAllDTypes)
    if (static_cast<std::uint32_t>(t) == code) return t;
  return std::nullopt;
}

std::string_view dtype_name(DType type) noexcept {
  switch (type) {
    case DType::bool_:
      return "bool";
    case DType::float16:
      return "float16";
    case DType::float32:
      return "float32";
    case DType::float64:
      return "float64";
    case DType::int8:
      return "int8";
    case DType::int16:
      return "int16";
    case DType::int32:
      return "int32";
    case DType::int64:
      return "int64";
    case DType::uint8:
      return "uint8";
    case DType::uint16:
      return "uint16";
    case DType::uint32:
      return "uint32";
    case DType::uint64:
      return "uint64";
    case DType::bfloat16:
      return "bfloat16";
    case DType::float8_e4m3fn:
      return "float8_e4m3fn";
    case DType::float8_e5m2:
      return "float8_e5m2";
    case DType::complex64:
      return "complex64";
    case DType::complex128:
      return "complex128";
    case DType::float8_e8m0fnu:
      return "float8_e8m0fnu";
    case DType::float4_e2m1fn_x2:
      return "float4_e2m1fn_x2";
    case DType::utf8:
      return "string";
  }
  return "unknown";
}

std::optional<DType> dtype_from_name(std::string_view name) noexcept {
  for (DType t : kAllDTypes)
    if (dtype_name(t) == name) return t;
  return std::nullopt;
}

std::size_t dtype_size(DType type) noexcept {
  switch (type) {
    case DType::bool_:
    case DType::int8:
    case DType::uint8:
    case DType::float8_e4m3fn:
    case DType::float8_e5m2:
    case DType::float8_e8m0fnu:
    case DType::float4_e2m1fn_x2:  // two FP4 values
      return 1;
    case DType::float16:
    case DType::bfloat16:
    case DType::int16:
    case DType::uint16:
      return 2;
    case DType::float32:
    case DType::int32:
    case DType::uint32:
      return 4;
    case DType::float64:
    case DType::int64:
    case DType::uint64:
    case DType::complex64:
      return 8;
    case DType::complex128:
      return 16;
    case DType::utf8:
      return 0;
  }
  return 0;
}

bool dtype_is_floating(DType type) noexcept {
  return type == DType::float16 || type == DType::bfloat16 || type == DType::float32 ||
         type == DType::float64 || type == DType::float8_e4m3fn || type == DType::float8_e5m2;
}

bool dtype_is_complex(DType type) noexcept {
  return type == DType::complex64 || type == DType::complex128;
}

}  // namespace modelzip
