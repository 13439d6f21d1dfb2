// Conversions between modelzip::Tensor and numpy.
//
// To numpy: dense tensors of fixed-size types become ndarrays that VIEW the
// tensor's bytes (no copy); the array's base is a capsule owning a copy of
// the Bytes, which keeps the archive mapping alive for as long as the array
// (or any view of it) lives. bfloat16 is viewed as uint16 and the float8
// types as uint8 (numpy has none of them: the raw bits), utf8 becomes an object ndarray of str (a
// copy), sparse COO a modelzip.SparseCOO of two views, a quantized tensor a
// modelzip.QuantizedTensor viewing its integers, scales and zero points.
//
// From numpy: arrays prepared by modelzip/_values.py (C-contiguous,
// little-endian, supported dtype) are BORROWED: the Tensor views the array's
// buffer and keeps the array alive through python_keeper(), so nothing is
// copied and the buffer outlives the commit.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "modelzip/tensor.hpp"

namespace modelzip::python {

// The numpy dtype arrays of `type` get: "<u2" for bfloat16, "u1" for the
// float8 types, object for utf8.
py::dtype numpy_dtype(DType type);

// The tensor as numpy (see above). Arrays are read-only unless `writable`
// (only for tensors whose memory nobody else sees: ReadMode::copy reads).
py::object tensor_to_python(const Tensor& tensor, bool writable);

// A tensor from one tuple made by modelzip._values.to_savable:
//   ("dense", ndarray, dtype_name), ("strings", list_of_str, shape) or
//   ("sparse", indices, values, shape, dtype_name) or ("quantized", ...) as
//   QuantizedTensor._savable() makes it.
// Throws ValueError / TypeError when the tuple does not hold what it must
// (a str that UTF-8 cannot encode: ValueError naming `name`, if given, and
// the string's index).
Tensor tensor_from_savable(const py::tuple& savable, std::string_view name = {});

}  // namespace modelzip::python
