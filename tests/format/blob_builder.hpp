// Hand-built tensor blob entries for tests: any header field (including
// values the writer never produces: unknown enums, lying segments, big-endian
// data), followed by caller-chosen data bytes; quantization tables of each
// scheme; the bytes of an encoded blob. Used by the format tests and the
// hostile corpus maker (tests/hostile/make_corpus.cpp), whose committed
// files depend on these bytes: a change here must leave them identical.
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "format/tensor_blob.hpp"
#include "tensor_generated.h"

namespace modelzip::testing {

// A Quantization table (FORMAT.md section 6.1), any field value.
struct QuantSpec {
  int scheme = 0, storage = 0;
  double scale = 1;
  std::int64_t zero_point = 0, axis = 0;
  std::uint64_t block_size = 0;
  int scale_type = 6;  // DOUBLE
  std::optional<std::pair<std::uint64_t, std::uint64_t>> scales, zero_points;
};

// Tables of each scheme (FORMAT.md section 6.1); the other fields keep
// QuantSpec's defaults. Enum values as in schemas/tensor.fbs: scheme 0
// affine-per-tensor, 1 affine-per-axis, 2 block-symmetric; storage 0 int8,
// 1 uint8, 2 int4; scale_type 3 FLOAT16, 5 FLOAT, 6 DOUBLE.
inline QuantSpec per_tensor(double scale, std::int64_t zero_point, int storage = 0) {
  QuantSpec q;
  q.scheme = 0;
  q.storage = storage;
  q.scale = scale;
  q.zero_point = zero_point;
  return q;
}
inline QuantSpec per_axis(std::int64_t axis) {
  QuantSpec q;
  q.scheme = 1;
  q.axis = axis;
  return q;
}
inline QuantSpec blocks(std::int64_t axis, std::uint64_t block_size, int storage = 0,
                        int scale_type = 5) {
  QuantSpec q;
  q.scheme = 2;
  q.storage = storage;
  q.axis = axis;
  q.block_size = block_size;
  q.scale_type = scale_type;
  return q;
}

struct BlobSpec {
  int dtype = 5;                                                                 // FLOAT
  std::optional<std::vector<std::int64_t>> shape = std::vector<std::int64_t>{};  // nullopt: absent
  int layout = 0;
  int byte_order = 0;
  std::optional<std::pair<std::uint64_t, std::uint64_t>> values, offsets,
      indices;  // {offset, length}
  std::uint64_t nnz = 0;
  std::uint32_t alignment = 64;
  bool identifier = true;
  std::optional<QuantSpec> quantization;
};

// The size-prefixed FlatBuffer header alone.
inline std::string blob_header(const BlobSpec& s) {
  flatbuffers::FlatBufferBuilder fbb(256);
  flatbuffers::Offset<flatbuffers::Vector<std::int64_t>> shape;
  if (s.shape) shape = fbb.CreateVector(*s.shape);
  fb::Segment v(s.values ? s.values->first : 0, s.values ? s.values->second : 0);
  fb::Segment o(s.offsets ? s.offsets->first : 0, s.offsets ? s.offsets->second : 0);
  fb::Segment ix(s.indices ? s.indices->first : 0, s.indices ? s.indices->second : 0);
  fbb.ForceDefaults(true);
  flatbuffers::Offset<fb::Quantization> quant;
  if (const auto& q = s.quantization) {
    fb::Segment sc(q->scales ? q->scales->first : 0, q->scales ? q->scales->second : 0);
    fb::Segment zp(q->zero_points ? q->zero_points->first : 0,
                   q->zero_points ? q->zero_points->second : 0);
    fb::QuantizationBuilder qb(fbb);
    qb.add_scheme(static_cast<fb::QuantScheme>(q->scheme));
    qb.add_storage(static_cast<fb::QuantStorage>(q->storage));
    qb.add_scale(q->scale);
    qb.add_zero_point(q->zero_point);
    qb.add_axis(q->axis);
    qb.add_block_size(q->block_size);
    qb.add_scale_type(static_cast<fb::DataType>(q->scale_type));
    if (q->scales) qb.add_scales(&sc);
    if (q->zero_points) qb.add_zero_points(&zp);
    quant = qb.Finish();
  }
  fb::TensorHeaderBuilder h(fbb);
  h.add_dtype(static_cast<fb::DataType>(s.dtype));
  if (s.shape) h.add_shape(shape);
  h.add_layout(static_cast<fb::Layout>(s.layout));
  h.add_byte_order(static_cast<fb::ByteOrder>(s.byte_order));
  if (s.values) h.add_values(&v);
  if (s.offsets) h.add_offsets(&o);
  if (s.indices) h.add_indices(&ix);
  h.add_nnz(s.nnz);
  h.add_alignment(s.alignment);
  if (s.quantization) h.add_quantization(quant);
  auto root = h.Finish();
  if (s.identifier)
    fbb.FinishSizePrefixed(root, fb::TensorHeaderIdentifier());
  else
    fbb.FinishSizePrefixed(root);
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

// Header, zero padding to `data_at`, then `data`. With data_at == 0 the data
// starts at the first multiple of 64 after the header.
inline std::string blob_entry(const BlobSpec& s, const std::string& data,
                              std::uint64_t data_at = 0) {
  std::string out = blob_header(s);
  if (data_at == 0) data_at = (out.size() + 63) / 64 * 64;
  if (out.size() < data_at) out.resize(data_at, '\0');
  return out + data;
}

// Offset where blob_entry() puts the data for `s` (header size rounded up to
// 64). The header size does not depend on the segment values.
inline std::uint64_t blob_data_offset(const BlobSpec& s) {
  return (blob_header(s).size() + 63) / 64 * 64;
}

// A quantized blob (layout QUANTIZED, FORMAT.md section 6.1) as writers
// place it: values at the first data offset, then the scales and the zero
// points, each at the next multiple of 64. Change `spec` to make it lie.
struct QBlob {
  BlobSpec spec;
  std::string data;
};
inline QBlob qblob(int dtype, std::vector<std::int64_t> shape, QuantSpec q,
                   const std::string& values, const std::string& scales = "",
                   const std::string& zps = "") {
  using Seg = std::pair<std::uint64_t, std::uint64_t>;
  QBlob b;
  b.spec.dtype = dtype;
  b.spec.shape = shape;
  b.spec.layout = 2;
  b.spec.quantization = q;
  b.spec.values = b.spec.quantization->scales = b.spec.quantization->zero_points =
      Seg{0, 0};  // present, so the header size is final
  const std::uint64_t at = blob_data_offset(b.spec);
  std::uint64_t pos = at;
  auto place = [&](const std::string& bytes) -> std::optional<Seg> {
    if (bytes.empty()) return Seg{0, 0};
    pos = (pos + 63) / 64 * 64;
    b.data.resize(pos - at, '\0');
    b.data += bytes;
    Seg seg{pos, bytes.size()};
    pos += bytes.size();
    return seg;
  };
  b.spec.values = place(values);
  b.spec.quantization->scales = place(scales);
  b.spec.quantization->zero_points = place(zps);
  return b;
}
inline std::string entry(const QBlob& b) {
  return blob_entry(b.spec, b.data);
}

// The bytes of an encoded blob (its pieces one after the other), as the
// archive stores the entry.
inline std::string concat(const format::EncodedBlob& b) {
  std::string s;
  for (const auto& p : b.pieces) s.append(p.as_string_view());
  return s;
}

// Little-endian integers in strings.
inline std::uint64_t get_u32(const std::string& s, std::size_t at = 0) {
  std::uint32_t v;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}
inline std::uint64_t get_u64(const std::string& s, std::size_t at = 0) {
  std::uint64_t v;
  std::memcpy(&v, s.data() + at, 8);
  return v;
}
inline void put_u32(std::string& s, std::uint32_t v) {
  s.append(reinterpret_cast<const char*>(&v), 4);
}
inline void patch_u32(std::string& s, std::size_t at, std::uint32_t v) {
  std::memcpy(s.data() + at, &v, 4);
}

// Little-endian / big-endian encodings of values.
template <class T>
std::string le_bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}
template <class T>
std::string be_bytes(const std::vector<T>& v) {
  std::string out;
  for (const T& x : v) {
    std::string b(reinterpret_cast<const char*>(&x), sizeof(T));
    out.append(b.rbegin(), b.rend());
  }
  return out;
}

}  // namespace modelzip::testing
