// The NumPy .npy format (numpy/lib/format.py, versions 1.0, 2.0, 3.0), shared
// by the .npy and .npz converters. See modelzip/convert.hpp for what is
// accepted and how each dtype is written.
#pragma once

#include <string>

#include "modelzip/bytes.hpp"
#include "modelzip/limits.hpp"
#include "modelzip/tensor.hpp"

namespace modelzip::convert::detail {

// Parses a complete .npy file. Throws Error(corrupt) with the byte offset,
// Error(unsupported) for dtypes modelzip cannot hold, Error(limit_exceeded).
Tensor parse_npy(const Bytes& file, const Limits& limits);

// A .npy file as its header (magic, version, length, dict, padding to 64
// bytes) followed by `data` (the tensor's bytes, or their conversion for
// string tensors). Throws Error(unsupported) for sparse tensors and strings
// ending in U+0000.
struct NpyParts {
  std::string header;
  Bytes data;
};
NpyParts npy_parts(const Tensor& tensor);

// The header alone: numpy's type string of a non-string dtype (Error(
// unsupported) for utf8), and the header of an array of `descr` and `shape`
// (for writers that stream the data after it).
std::string npy_descr(DType dtype);
std::string npy_header(const std::string& descr, const Shape& shape);

}  // namespace modelzip::convert::detail
