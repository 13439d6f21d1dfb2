// Chunk 4, QuantizedArray (product quantization): projection u32 (flag),
// norms u32 (flag), quantized_len u32 (M), reconstructed_len u32 (D),
// n_centroids u32 (K), rows u64, quantized type u32 (1 = u8), reconstructed
// type u32 (10 = f32), padding, then: projection D x D f32 (if flagged),
// subquantizers M x K x (D/M) f32, norms rows f32 (if flagged), codes
// rows x M u8.
#include <algorithm>

#include "finalfusion/storage.hpp"
#include "finalfusion/storage_shape.hpp"

namespace modelzip::finalfusion::detail {

using modelzip::detail::ByteReader;

void QuantizedStorage::reconstruct_unscaled(std::size_t r, float* out) const {
  const std::uint32_t ds = sub_dims();
  const std::uint8_t* code = codes.data() + r * n_subquantizers;
  if (projection.empty()) {
    for (std::uint32_t m = 0; m < n_subquantizers; ++m)
      std::memcpy(out + static_cast<std::size_t>(m) * ds, centroid(m, code[m]), ds * sizeof(float));
    return;
  }
  // out = x P^T, i.e. out[i] = sum_j P[i][j] x[j].
  std::vector<float> x(dims);
  for (std::uint32_t m = 0; m < n_subquantizers; ++m)
    std::memcpy(x.data() + static_cast<std::size_t>(m) * ds, centroid(m, code[m]),
                ds * sizeof(float));
  const float* p = projection.data();
  for (std::uint32_t i = 0; i < dims; ++i) {
    float s = 0;
    const float* pi = p + static_cast<std::size_t>(i) * dims;
    for (std::uint32_t j = 0; j < dims; ++j) s += pi[j] * x[j];
    out[i] = s;
  }
}

void QuantizedStorage::reconstruct(std::size_t r, float* out) const {
  reconstruct_unscaled(r, out);
  if (!norms.empty()) {
    const float n = norms.data()[r];
    for (std::uint32_t i = 0; i < dims; ++i) out[i] *= n;
  }
}

void Storage::add_row(std::size_t r, float* out, float* scratch) const {
  const float* src;
  if (quantized) {
    pq.reconstruct(r, scratch);
    src = scratch;
  } else {
    src = dense.row(r);
  }
  const std::size_t n = dims();
  for (std::size_t i = 0; i < n; ++i) out[i] += src[i];
}

QuantizedStorage read_quantized(ByteReader& body, const Bytes& file) {
  const std::uint64_t start = body.absolute_position();
  const StorageFields fields = read_storage_fields(ChunkId::quantized_array, body);
  const bool projection = fields.quantizer->has_projection, norms = fields.quantizer->has_norms;
  const std::uint32_t m = fields.quantizer->n_subquantizers, d = fields.quantizer->dims,
                      k = fields.quantizer->n_centroids;
  const std::uint64_t rows = fields.rows;
  expect_type(body, kTypeU8, "QuantizedArray quantized type");
  expect_type(body, kTypeF32, "QuantizedArray reconstructed type");
  auto fail = [&](const std::string& problem) {
    throw Error(ErrorCode::corrupt, "QuantizedArray: " + problem, ErrorContext{.offset = start});
  };
  if (m == 0) fail("quantized length is 0");
  if (d % m != 0)
    fail("reconstructed length " + std::to_string(d) +
         " is not a multiple of the quantized length " + std::to_string(m));
  if (k == 0 || k > 256)
    fail(std::to_string(k) + " centroids per subquantizer; u8 codes allow 1 to 256");
  skip_padding(body, "QuantizedArray padding");

  // d * d and m * k * (d / m) fit easily (d, m < 2^32, k <= 256); norms_n <= codes_n.
  const std::uint64_t projection_n = projection ? static_cast<std::uint64_t>(d) * d : 0;
  const std::uint64_t centroids_n = static_cast<std::uint64_t>(m) * k * (d / m);
  const std::uint64_t norms_n = norms ? rows : 0;
  const std::uint64_t codes_n = checked_product(body, rows, m, "QuantizedArray codes");
  const std::uint64_t floats = projection_n + centroids_n + norms_n;
  const std::uint64_t float_bytes = checked_product(body, floats, 4, "QuantizedArray data");
  if (float_bytes > UINT64_MAX - codes_n)
    body.fail("QuantizedArray data", "size overflows 64 bits");
  const std::uint64_t needed = float_bytes + codes_n;
  if (needed > body.remaining())
    body.fail("QuantizedArray", "needs " + std::to_string(needed) + " bytes of data, only " +
                                    std::to_string(body.remaining()) + " left in the chunk");

  QuantizedStorage q;
  q.n_subquantizers = m;
  q.n_centroids = k;
  q.dims = d;
  q.rows = static_cast<std::size_t>(rows);
  auto take_floats = [&](std::uint64_t n) {
    auto a =
        SharedArray<float>::from_bytes(file, body.absolute_position(), static_cast<std::size_t>(n));
    body.skip(n * 4, "QuantizedArray data");
    return a;
  };
  if (projection) q.projection = take_floats(projection_n);
  q.centroids = take_floats(centroids_n);
  if (norms) q.norms = take_floats(norms_n);
  const std::uint64_t codes_at = body.absolute_position();
  q.codes =
      SharedArray<std::uint8_t>::from_bytes(file, codes_at, static_cast<std::size_t>(codes_n));
  body.skip(codes_n, "QuantizedArray codes");
  if (k < 256) {
    const auto codes = q.codes.span();
    auto bad = std::find_if(codes.begin(), codes.end(), [k](std::uint8_t c) { return c >= k; });
    if (bad != codes.end())
      throw Error(
          ErrorCode::corrupt,
          "QuantizedArray: code " + std::to_string(*bad) + " >= " + std::to_string(k) +
              " centroids",
          ErrorContext{.offset = codes_at + static_cast<std::uint64_t>(bad - codes.begin())});
  }
  return q;
}

void write_quantized(Sink& sink, const QuantizedStorage& q) {
  const std::uint64_t data_start = sink.position() + 12 + 5 * 4 + 8 + 2 * 4;
  const std::uint64_t pad = padding_at(data_start);
  const std::uint64_t length = 5 * 4 + 8 + 2 * 4 + pad +
                               4 * (q.projection.size() + q.centroids.size() + q.norms.size()) +
                               q.codes.size();
  sink.chunk_start(ChunkId::quantized_array, length);
  sink.u32(q.projection.empty() ? 0 : 1);
  sink.u32(q.norms.empty() ? 0 : 1);
  sink.u32(q.n_subquantizers);
  sink.u32(q.dims);
  sink.u32(q.n_centroids);
  sink.u64(q.rows);
  sink.u32(kTypeU8);
  sink.u32(kTypeF32);
  sink.padding();
  sink.f32s(q.projection.span());
  sink.f32s(q.centroids.span());
  sink.f32s(q.norms.span());
  sink.bytes(q.codes.data(), q.codes.size());
}

}  // namespace modelzip::finalfusion::detail
