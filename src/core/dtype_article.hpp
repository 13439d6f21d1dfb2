// How messages write "a tensor of dtype D": "a float32", "an int64".
// Header-only (the JNI library uses it too); pure; thread-safe; no errors.
#pragma once

#include <string>

#include "modelzip/dtype.hpp"

namespace modelzip::detail {

// The dtype's name after its indefinite article: "an" before the names
// spoken from a vowel (int8 to int64), "a" before the others ("a uint8",
// "a float8_e4m3fn", "a utf8").
inline std::string dtype_with_article(DType dtype) {
  const std::string_view name = dtype_name(dtype);
  return (name.starts_with("int") ? "an " : "a ") + std::string(name);
}

}  // namespace modelzip::detail
