// Fuzz target: one tensor blob entry (<tag>/params/<n>.fb), decoded by the
// blob codec (src/format/tensor_blob) as the archive does: header size,
// header, then the whole blob.
//
// Invariants: the decoded tensor agrees with its header, reads within its
// buffers (every byte is touched), and encodes and decodes back to itself.
#include <cstdint>
#include <vector>

#include "format/tensor_blob.hpp"
#include "fuzz_support.hpp"

using namespace modelzip;
using namespace modelzip::fuzz;
using namespace modelzip::format;

namespace {

Bytes concatenate(const EncodedBlob& blob) {
  std::vector<std::byte> out;
  for (const Bytes& piece : blob.pieces)
    out.insert(out.end(), piece.span().begin(), piece.span().end());
  return Bytes::take(std::move(out));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Bytes entry = input_bytes(data, size);
  const Limits limits;
  if (size >= 4) {
    std::uint64_t header_size = 0;
    if (attempt([&] { header_size = blob_header_size(entry.span(), size, limits); })) {
      FUZZ_CHECK(header_size <= size);
      attempt([&] {
        BlobHeader header = read_blob_header(entry.span().first(header_size), size, limits);
        FUZZ_CHECK(header.header_end == header_size);
      });
    }
  }
  Tensor tensor;
  if (!attempt([&] { tensor = decode_tensor_blob(entry, limits); })) return 0;
  keep(touch(tensor));
  Tensor again;
  FUZZ_CHECK(attempt([&] {
    const EncodedBlob encoded = encode_tensor_blob(tensor);
    again = decode_tensor_blob(concatenate(encoded), limits);
  }));
  FUZZ_CHECK(again == tensor);
  return 0;
}
