// Byte-order conversion of tensor element bytes, for readers of big-endian
// data (tensor blobs with byte_order BIG, '>' .npy files).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <span>

#include "modelzip/bytes.hpp"
#include "modelzip/dtype.hpp"

namespace modelzip::detail {

// The width of the units whose bytes a change of byte order reverses: the
// element size, except for the complex types, whose two parts (real,
// imaginary) are separate IEEE values swapped each on its own (4 bytes for
// complex64, 8 for complex128). 1 for utf8 (bytes) and the 1-byte types.
std::size_t byte_swap_unit(DType type) noexcept;

// An owned copy of `data` with the bytes of every `unit`-byte unit reversed.
// `unit` >= 1 and divides data.size() (a trailing partial unit is copied as
// it is).
Bytes byteswapped(std::span<const std::byte> data, std::size_t unit);

}  // namespace modelzip::detail
