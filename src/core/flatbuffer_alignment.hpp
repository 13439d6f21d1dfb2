// Element alignment of verified FlatBuffers vectors. Internal to modelzip.
//
// FlatBuffers 2.0.8's verifier checks the alignment of a vector's 4-byte
// length prefix but not of its elements, so a hostile buffer can place a
// vector of 8-byte scalars or structs at an address that is only 4-byte
// aligned. Reading an element would then be a misaligned load (undefined
// behaviour): every reader of such a vector checks this first. Buffers
// written by a FlatBuffers builder always pass.
#pragma once

#include <cstddef>
#include <cstdint>

namespace modelzip::detail {

// True when `v` is null (an absent vector) or its elements start at a multiple
// of `alignment`. `V` is a flatbuffers::Vector (anything with Data()).
template <class V>
bool flatbuffer_elements_aligned(const V* v, std::size_t alignment) noexcept {
  return v == nullptr || reinterpret_cast<std::uintptr_t>(v->Data()) % alignment == 0;
}

}  // namespace modelzip::detail
