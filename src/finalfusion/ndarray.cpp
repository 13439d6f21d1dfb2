// Chunk 2, NdArray: rows u64, cols u32, type u32 (10 = f32), padding
// (4 - pos % 4 bytes), rows x cols f32 little-endian, row-major.
#include "finalfusion/storage.hpp"
#include "finalfusion/storage_shape.hpp"

namespace modelzip::finalfusion::detail {

using modelzip::detail::ByteReader;

DenseStorage read_ndarray(ByteReader& body, const Bytes& file) {
  const StorageFields fields = read_storage_fields(ChunkId::ndarray, body);
  const std::uint64_t rows = fields.rows, cols = fields.dims;
  expect_type(body, kTypeF32, "NdArray data type");
  skip_padding(body, "NdArray padding");
  const std::uint64_t bytes =
      checked_product(body, checked_product(body, rows, cols, "NdArray size"), 4, "NdArray size");
  if (bytes > body.remaining())
    body.fail("NdArray", std::to_string(rows) + " x " + std::to_string(cols) + " matrix needs " +
                             std::to_string(bytes) + " bytes, only " +
                             std::to_string(body.remaining()) + " left in the chunk");
  DenseStorage storage;
  storage.rows = static_cast<std::size_t>(rows);
  storage.cols = cols;
  storage.data = SharedArray<float>::from_bytes(file, body.absolute_position(),
                                                static_cast<std::size_t>(rows * cols));
  body.skip(bytes, "NdArray data");
  return storage;
}

void write_ndarray(Sink& sink, const DenseStorage& storage) {
  if (storage.cols > UINT32_MAX)
    throw Error(ErrorCode::invalid_argument, "matrix has more than 2^32 - 1 columns");
  const std::uint64_t data_start = sink.position() + 12 + 8 + 4 + 4;
  const std::uint64_t pad = padding_at(data_start);
  sink.chunk_start(ChunkId::ndarray, 8 + 4 + 4 + pad + storage.data.size() * 4);
  sink.u64(storage.rows);
  sink.u32(static_cast<std::uint32_t>(storage.cols));
  sink.u32(kTypeF32);
  sink.padding();
  sink.f32s(storage.data.span());
}

}  // namespace modelzip::finalfusion::detail
