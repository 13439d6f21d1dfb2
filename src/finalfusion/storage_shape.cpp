#include "finalfusion/storage_shape.hpp"

#include <algorithm>

#include "modelzip/error.hpp"

namespace modelzip::finalfusion::detail {

using modelzip::detail::ByteReader;

StorageFields read_storage_fields(ChunkId id, ByteReader& body) {
  StorageFields s;
  if (id == ChunkId::ndarray) {
    s.rows = body.read<std::uint64_t>("NdArray rows");
    s.dims = body.read<std::uint32_t>("NdArray columns");
    return s;
  }
  QuantizerInfo q;
  q.has_projection = body.read<std::uint32_t>("QuantizedArray projection flag") != 0;
  q.has_norms = body.read<std::uint32_t>("QuantizedArray norms flag") != 0;
  q.n_subquantizers = body.read<std::uint32_t>("QuantizedArray quantized length");
  q.dims = body.read<std::uint32_t>("QuantizedArray reconstructed length");
  q.n_centroids = body.read<std::uint32_t>("QuantizedArray centroids");
  s.rows = body.read<std::uint64_t>("QuantizedArray rows");
  s.dims = q.dims;
  s.quantizer = q;
  return s;
}

Shape storage_shape(std::uint64_t size, const RangeRead& read) {
  // Up to `n` bytes from `at` (fewer at the file's end).
  const auto read_at = [&](std::uint64_t at, std::uint64_t n) {
    return at >= size ? Bytes() : read(at, std::min(n, size - at));
  };
  const Bytes head = read_at(0, kHeaderStartBytes);
  ByteReader h(head.span());
  std::uint64_t at = kHeaderStartBytes + std::uint64_t{4} * read_header_start(h);
  constexpr std::uint64_t kFrameBytes = 12;  // identifier u32, length u64
  for (int chunk = 0; chunk < 3 && at < size; ++chunk) {
    const Bytes bytes = read_at(at, kFrameBytes + kStorageFieldsBytes);
    ByteReader f(bytes.span(), at);
    const auto id = f.read<std::uint32_t>("chunk identifier");
    const auto length = f.read<std::uint64_t>("chunk length");
    if (id != static_cast<std::uint32_t>(ChunkId::ndarray) &&
        id != static_cast<std::uint32_t>(ChunkId::quantized_array)) {
      if (length > size - at - kFrameBytes)
        f.fail("chunk length", "declares " + std::to_string(length) + " bytes, only " +
                                   std::to_string(size - at - kFrameBytes) + " left in the file");
      at += kFrameBytes + length;
      continue;
    }
    const StorageFields s = read_storage_fields(static_cast<ChunkId>(id), f);
    if (s.rows > INT64_MAX) return {};
    return {static_cast<std::int64_t>(s.rows), static_cast<std::int64_t>(s.dims)};
  }
  return {};
}

}  // namespace modelzip::finalfusion::detail
