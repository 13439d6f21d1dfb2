// The shape of a .fifu file's storage, read from the fixed fields at the
// start of its storage chunk (schemas/FINALFUSION.md sections 3 and 4),
// either from a chunk body in memory (summaries, the chunk readers) or from
// a file read in ranges up to those fields (an archive listing its
// embedding parameters without reading their matrices).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "core/checked.hpp"
#include "finalfusion/chunk_io.hpp"
#include "modelzip/bytes.hpp"
#include "modelzip/finalfusion/embeddings.hpp"
#include "modelzip/tensor.hpp"

namespace modelzip::finalfusion::detail {

// The fixed fields at the start of a storage chunk's body: NdArray's rows
// and cols, or QuantizedArray's flags, lengths and rows (then `quantizer`
// is set and `dims` is its reconstructed length).
struct StorageFields {
  std::uint64_t rows = 0;
  std::uint64_t dims = 0;
  std::optional<QuantizerInfo> quantizer;
};

// The most bytes those fields take: QuantizedArray's five u32 and a u64.
inline constexpr std::uint64_t kStorageFieldsBytes = 28;

// Reads the fields of a chunk `id` (ndarray or quantized_array) at the
// start of `body`, leaving the reader after them. Error(corrupt) naming the
// field when the body ends before it; the values are not checked.
StorageFields read_storage_fields(ChunkId id, modelzip::detail::ByteReader& body);

// Reads `length` bytes of a file from byte `offset`; the range lies within
// the file.
using RangeRead = std::function<Bytes(std::uint64_t offset, std::uint64_t length)>;

// {rows, dims} of the storage chunk of the .fifu file of `size` bytes that
// `read` reads, reading the header and the chunk frames before the storage
// (at most two: [Metadata] Vocab Storage) and no further than the storage
// chunk's fixed fields. Empty when the storage is not among the first three
// chunks or its rows exceed INT64_MAX. Throws Error(corrupt) or
// Error(unsupported) for a wrong magic or version, a field cut short or a
// skipped chunk longer than the file, and what `read` throws. The bodies are
// not checked: Embeddings::read does that.
Shape storage_shape(std::uint64_t size, const RangeRead& read);

}  // namespace modelzip::finalfusion::detail
