// Chunk 6, NdNorms: n u64, type u32 (10 = f32), padding, n f32. One norm per
// vocabulary word: the L2 norm of the word's vector before it was
// normalised for storage.
#include "finalfusion/storage.hpp"

namespace modelzip::finalfusion::detail {

using modelzip::detail::ByteReader;

SharedArray<float> read_norms(ByteReader& body, const Bytes& file) {
  const auto n = body.read<std::uint64_t>("NdNorms length");
  expect_type(body, kTypeF32, "NdNorms data type");
  skip_padding(body, "NdNorms padding");
  if (n > body.remaining() / 4)
    body.fail("NdNorms", std::to_string(n) + " norms need " + std::to_string(n) +
                             " x 4 bytes, only " + std::to_string(body.remaining()) +
                             " left in the chunk");
  auto norms =
      SharedArray<float>::from_bytes(file, body.absolute_position(), static_cast<std::size_t>(n));
  body.skip(n * 4, "NdNorms data");
  return norms;
}

void write_norms(Sink& sink, std::span<const float> norms) {
  const std::uint64_t data_start = sink.position() + 12 + 8 + 4;
  sink.chunk_start(ChunkId::ndnorms, 8 + 4 + padding_at(data_start) + norms.size() * 4);
  sink.u64(norms.size());
  sink.u32(kTypeF32);
  sink.padding();
  sink.f32s(norms);
}

}  // namespace modelzip::finalfusion::detail
