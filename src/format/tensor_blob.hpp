// The tensor blob codec: <tag>/params/<n>.fb and <tag>/updater/<n>.fb.
//
// Layout of one blob entry (FORMAT.md, "Tensor blobs"):
//   [0, 4)          u32 LE  S = size of the FlatBuffer
//   [4, 4 + S)      FlatBuffer, root TensorHeader, identifier "MZTB"
//   zero padding to the first segment
//   segments        values, then offsets (utf8), then indices (COO), then
//                   quantization scales and zero points, each at
//                   an offset (from the entry start) that is a multiple of 64
//                   (writers) / of the header's `alignment` (readers); the
//                   entry ends where the last segment ends.
//
// Encoding never copies tensor data: it yields the header bytes plus a list
// of pieces (views of the tensor's Bytes and zero padding) to be written in
// order. Decoding validates the header completely (FlatBuffers verifier,
// supported enums, rank and numel, every segment inside the entry, aligned,
// non-overlapping, of exactly the size the dtype and shape imply) before any
// data is used.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "modelzip/bytes.hpp"
#include "modelzip/limits.hpp"
#include "modelzip/tensor.hpp"

namespace modelzip::format {

inline constexpr std::uint64_t kSegmentAlignment = 64;

struct EncodedBlob {
  std::vector<Bytes> pieces;  // write these in order; their sizes sum to `size`
  std::uint64_t size = 0;
};

EncodedBlob encode_tensor_blob(const Tensor& tensor);

// What encode_tensor_blob writes for a dense tensor of `dtype` and `shape`,
// without the tensor: the header piece (size-prefixed FlatBuffer), where the
// values segment starts and the entry size. Writers that assemble one blob
// from several ranks' blocks use it. Throws Error(invalid_argument) for
// utf8 or an overflowing size.
struct DenseBlobLayout {
  Bytes header;
  std::uint64_t values_offset = 0;  // from the entry start; 64-aligned unless numel is 0
  std::uint64_t size = 0;           // the whole entry
};
DenseBlobLayout dense_blob_layout(DType dtype, const Shape& shape);

struct Segment {
  std::uint64_t offset = 0, length = 0;
};

// What the header says, validated against `entry_size`.
struct BlobHeader {
  DType dtype = DType::float32;
  Shape shape;
  Layout layout = Layout::dense;
  bool big_endian = false;
  std::uint64_t nnz = 0;
  Segment values, offsets, indices;
  // Layout::quantized: the parameters (scales and zero_points left empty:
  // their bytes are the segments below, read by decode_tensor_blob).
  std::optional<Quantization> quantization;
  Segment scales, zero_points;
  std::uint64_t header_end = 0;  // 4 + S
  std::uint64_t data_bytes() const noexcept {
    return values.length + offsets.length + indices.length + scales.length + zero_points.length;
  }
};

// Bytes of the entry prefix needed to read the header: 4 + S. Reads the u32
// at the start of `prefix` (>= 4 bytes); throws Error(corrupt) if S is
// beyond the entry or Error(limit_exceeded) beyond the FlatBuffer limit.
std::uint64_t blob_header_size(std::span<const std::byte> prefix, std::uint64_t entry_size,
                               const Limits& limits);

// Parses and validates the header. `prefix` holds at least the first
// blob_header_size() bytes of an entry of `entry_size` bytes.
BlobHeader read_blob_header(std::span<const std::byte> prefix, std::uint64_t entry_size,
                            const Limits& limits);

// Decodes a complete blob entry. Values are zero-copy slices of `entry` when
// little-endian and aligned for their element type; otherwise they are
// converted into owned memory.
Tensor decode_tensor_blob(const Bytes& entry, const Limits& limits);

}  // namespace modelzip::format
