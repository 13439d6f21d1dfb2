#include "format/tensor_blob.hpp"

#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/byte_swap.hpp"
#include "core/checked.hpp"
#include "core/fail.hpp"
#include "core/flatbuffer_alignment.hpp"
#include "core/quantization_rules.hpp"
#include "modelzip/error.hpp"
#include "tensor_generated.h"

namespace modelzip::format {
namespace {

namespace fbs = modelzip::fb;

using modelzip::detail::fail_corrupt;

Bytes zero_padding(std::uint64_t n) {
  static const std::vector<std::byte> zeros(4096);
  if (n <= zeros.size()) return Bytes::borrow(std::span(zeros.data(), n), nullptr);
  return Bytes::take(std::vector<std::byte>(n));
}

std::string segment_text(const Segment& s) {
  return "[" + std::to_string(s.offset) + ", +" + std::to_string(s.length) + ")";
}

// `b` as is when aligned to `alignment`, else an owned (aligned) copy.
Bytes aligned(const Bytes& b, std::size_t alignment) {
  if (alignment <= 1 || reinterpret_cast<std::uintptr_t>(b.data()) % alignment == 0) return b;
  return b.to_owned();
}

}  // namespace

namespace {

struct EncodedHeader {
  Bytes bytes;                  // the size-prefixed FlatBuffer
  std::array<Segment, 5> segs;  // values, offsets, indices, scales, zero points
};

fbs::QuantScheme fb_scheme(QuantScheme s) {
  switch (s) {
    case QuantScheme::affine_per_tensor:
      return fbs::QuantScheme::AFFINE_PER_TENSOR;
    case QuantScheme::affine_per_axis:
      return fbs::QuantScheme::AFFINE_PER_AXIS;
    case QuantScheme::block_symmetric:
      return fbs::QuantScheme::BLOCK_SYMMETRIC;
  }
  throw Error(ErrorCode::invalid_argument, "unknown quantization scheme");
}

fbs::QuantStorage fb_storage(QuantStorage s) {
  switch (s) {
    case QuantStorage::int8:
      return fbs::QuantStorage::INT8;
    case QuantStorage::uint8:
      return fbs::QuantStorage::UINT8;
    case QuantStorage::int4:
      return fbs::QuantStorage::INT4;
  }
  throw Error(ErrorCode::invalid_argument, "unknown quantization storage");
}

// The header of a blob with segments of the given lengths (values, offsets,
// indices, scales, zero points); `q` for a quantized tensor.
EncodedHeader encode_header(DType dtype, const Shape& shape_dims, Layout layout, std::uint64_t nnz,
                            const std::array<std::uint64_t, 5>& lengths, const Quantization* q) {
  flatbuffers::FlatBufferBuilder fbb(256);
  // The header size does not depend on the segment offsets (fixed-size
  // structs), so build once with placeholders to learn it, then for real.
  auto build = [&](std::uint64_t first) {
    fbb.Clear();
    auto shape = fbb.CreateVector(shape_dims);
    // Non-empty segments follow each other at aligned offsets; an empty
    // segment is written as {0, 0}.
    std::uint64_t pos = first;
    std::array<Segment, 5> segs;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      if (lengths[i] == 0) continue;
      segs[i] = Segment{detail::align_up(pos, kSegmentAlignment), lengths[i]};
      pos = segs[i].offset + segs[i].length;
    }
    auto fb_seg = [&](std::size_t i) { return fbs::Segment(segs[i].offset, segs[i].length); };
    flatbuffers::Offset<fbs::Quantization> quant;
    if (q) {
      fbs::Segment scales_seg = fb_seg(3), zps_seg = fb_seg(4);
      fbs::QuantizationBuilder qb(fbb);
      qb.add_scheme(fb_scheme(q->scheme));
      qb.add_storage(fb_storage(q->storage));
      if (q->scheme == QuantScheme::affine_per_tensor) {
        qb.add_scale(q->scale);
        qb.add_zero_point(q->zero_point);
      } else {
        qb.add_axis(q->axis);
        qb.add_scale_type(static_cast<fbs::DataType>(q->scale_dtype));
        qb.add_scales(&scales_seg);
        if (q->scheme == QuantScheme::affine_per_axis) qb.add_zero_points(&zps_seg);
        if (q->scheme == QuantScheme::block_symmetric) qb.add_block_size(q->block_size);
      }
      quant = qb.Finish();
    }
    fbs::Segment values_seg = fb_seg(0), offsets_seg = fb_seg(1), indices_seg = fb_seg(2);
    fbs::TensorHeaderBuilder h(fbb);
    h.add_dtype(static_cast<fbs::DataType>(dtype));
    h.add_shape(shape);
    h.add_layout(layout == Layout::dense        ? fbs::Layout::DENSE
                 : layout == Layout::sparse_coo ? fbs::Layout::SPARSE_COO
                                                : fbs::Layout::QUANTIZED);
    h.add_byte_order(fbs::ByteOrder::LITTLE);
    h.add_values(&values_seg);
    h.add_offsets(&offsets_seg);
    h.add_indices(&indices_seg);
    h.add_nnz(nnz);
    h.add_alignment(static_cast<std::uint32_t>(kSegmentAlignment));
    if (q) h.add_quantization(quant);
    fbb.FinishSizePrefixed(h.Finish(), fbs::TensorHeaderIdentifier());
    return segs;
  };
  build(0);
  std::uint64_t first = detail::align_up(fbb.GetSize(), kSegmentAlignment);
  auto segs = build(first);
  if (detail::align_up(fbb.GetSize(), kSegmentAlignment) != first)
    throw Error(ErrorCode::invalid_argument, "tensor blob header size is not stable");
  return EncodedHeader{
      Bytes::copy_of(
          std::span(reinterpret_cast<const std::byte*>(fbb.GetBufferPointer()), fbb.GetSize())),
      segs};
}

}  // namespace

EncodedBlob encode_tensor_blob(const Tensor& t) {
  const Quantization* q = t.quantization();
  static const Bytes none;
  const Bytes* data[5] = {&t.values(), &t.offsets(), &t.indices(), q ? &q->scales : &none,
                          q ? &q->zero_points : &none};
  std::array<std::uint64_t, 5> lengths{};
  for (std::size_t i = 0; i < 5; ++i) lengths[i] = data[i]->size();
  EncodedHeader h = encode_header(t.dtype(), t.shape(), t.layout(), t.nnz(), lengths, q);
  EncodedBlob blob;
  blob.pieces.push_back(h.bytes);
  std::uint64_t pos = h.bytes.size();
  for (std::size_t i = 0; i < 5; ++i) {
    if (data[i]->empty()) continue;
    if (h.segs[i].offset > pos) blob.pieces.push_back(zero_padding(h.segs[i].offset - pos));
    blob.pieces.push_back(*data[i]);
    pos = h.segs[i].offset + h.segs[i].length;
  }
  blob.size = pos;
  return blob;
}

DenseBlobLayout dense_blob_layout(DType dtype, const Shape& shape) {
  if (dtype_size(dtype) == 0)
    throw Error(ErrorCode::invalid_argument, "a dense blob layout needs a fixed-size dtype, not " +
                                                 std::string(dtype_name(dtype)));
  std::uint64_t n = detail::checked_mul(shape_numel(shape), dtype_size(dtype), "tensor bytes");
  EncodedHeader h = encode_header(dtype, shape, Layout::dense, 0, {n, 0, 0, 0, 0}, nullptr);
  DenseBlobLayout out;
  out.header = h.bytes;
  out.values_offset = n == 0 ? h.bytes.size() : h.segs[0].offset;
  out.size = n == 0 ? h.bytes.size() : h.segs[0].offset + n;
  return out;
}

std::uint64_t blob_header_size(std::span<const std::byte> prefix, std::uint64_t entry_size,
                               const Limits& limits) {
  if (prefix.size() < 4 || entry_size < 4)
    fail_corrupt("tensor blob: shorter than its 4-byte size prefix", {.offset = 0});
  std::uint64_t s = detail::load_le<std::uint32_t>(prefix.data());
  if (s > limits.max_flatbuffer_bytes)
    throw Error(ErrorCode::limit_exceeded,
                "tensor blob: header of " + std::to_string(s) + " bytes exceeds the limit of " +
                    std::to_string(limits.max_flatbuffer_bytes),
                ErrorContext{.offset = 0});
  if (s + 4 > entry_size)
    fail_corrupt("tensor blob: header size " + std::to_string(s) + " exceeds the entry (" +
                     std::to_string(entry_size) + " bytes)",
                 {.offset = 0});
  return s + 4;
}

BlobHeader read_blob_header(std::span<const std::byte> prefix, std::uint64_t entry_size,
                            const Limits& limits) {
  const std::uint64_t header_end = blob_header_size(prefix, entry_size, limits);
  if (prefix.size() < header_end)
    fail_corrupt("tensor blob: header is truncated", {.offset = prefix.size()});
  const auto* buf = reinterpret_cast<const std::uint8_t*>(prefix.data());
  // The verifier checks alignment relative to `buf` only; the accessors load
  // scalars in place, so `buf` itself must be aligned for the widest scalar
  // (int64 dimensions). A misplaced blob (a hostile archive, a mapping at an
  // odd offset) is read from an aligned copy of its header instead.
  std::vector<std::uint64_t> aligned_header;
  if (reinterpret_cast<std::uintptr_t>(buf) % alignof(std::uint64_t) != 0) {
    aligned_header.resize(static_cast<std::size_t>(header_end / 8 + 1));
    std::memcpy(aligned_header.data(), buf, static_cast<std::size_t>(header_end));
    buf = reinterpret_cast<const std::uint8_t*>(aligned_header.data());
  }
  flatbuffers::Verifier::Options options;
  options.max_depth = limits.max_flatbuffer_depth;
  options.max_tables = limits.max_flatbuffer_tables;
  options.check_alignment = true;
  flatbuffers::Verifier verifier(buf, header_end, options);
  if (!fbs::VerifySizePrefixedTensorHeaderBuffer(verifier))
    fail_corrupt("tensor blob: header FlatBuffer fails verification (or lacks the MZTB identifier)",
                 {.offset = 4});
  const fbs::TensorHeader* h = fbs::GetSizePrefixedTensorHeader(buf);

  BlobHeader out;
  out.header_end = header_end;
  auto dtype = dtype_from_code(static_cast<std::uint32_t>(h->dtype()));
  if (!dtype)
    throw Error(ErrorCode::unsupported, "tensor blob: data type " +
                                            std::to_string(static_cast<int>(h->dtype())) +
                                            " is not supported");
  out.dtype = *dtype;
  if (!detail::flatbuffer_elements_aligned(h->shape(), alignof(std::int64_t)))
    fail_corrupt("tensor blob: header FlatBuffer: shape elements are not 8-byte aligned",
                 {.offset = static_cast<std::uint64_t>(h->shape()->Data() - buf)});
  if (h->shape()) {
    if (h->shape()->size() > limits.max_rank)
      throw Error(ErrorCode::limit_exceeded,
                  "tensor blob: rank " + std::to_string(h->shape()->size()) +
                      " exceeds the limit of " + std::to_string(limits.max_rank));
    out.shape.assign(h->shape()->begin(), h->shape()->end());
  }
  std::uint64_t numel = 1;
  for (auto d : out.shape) {
    if (d < 0) fail_corrupt("tensor blob: negative dimension " + std::to_string(d));
    numel = detail::checked_mul(numel, static_cast<std::uint64_t>(d), "tensor blob: shape");
  }
  switch (h->layout()) {
    case fbs::Layout::DENSE:
      out.layout = Layout::dense;
      break;
    case fbs::Layout::SPARSE_COO:
      out.layout = Layout::sparse_coo;
      break;
    case fbs::Layout::QUANTIZED:
      out.layout = Layout::quantized;
      break;
    default:
      throw Error(ErrorCode::unsupported,
                  "tensor blob: unknown layout " + std::to_string(static_cast<int>(h->layout())));
  }
  switch (h->byte_order()) {
    case fbs::ByteOrder::LITTLE:
      out.big_endian = false;
      break;
    case fbs::ByteOrder::BIG:
      out.big_endian = true;
      break;
    default:
      throw Error(ErrorCode::unsupported, "tensor blob: unknown byte order");
  }
  const std::uint32_t alignment = h->alignment();
  if (alignment < 8 || alignment > 4096 || (alignment & (alignment - 1)) != 0)
    fail_corrupt("tensor blob: alignment " + std::to_string(alignment) +
                 " is not a power of two from 8 to 4096");
  auto seg = [](const fbs::Segment* s) {
    return s ? Segment{s->offset(), s->length()} : Segment{};
  };
  out.values = seg(h->values());
  out.offsets = seg(h->offsets());
  out.indices = seg(h->indices());
  out.nnz = h->nnz();

  // Sizes implied by dtype, shape and layout.
  const std::uint64_t width = dtype_size(out.dtype);
  std::uint64_t want_values = 0, want_offsets = 0, want_indices = 0, want_scales = 0,
                want_zero_points = 0;
  if ((h->quantization() != nullptr) != (out.layout == Layout::quantized))
    fail_corrupt(out.layout == Layout::quantized
                     ? "tensor blob: the QUANTIZED layout needs a quantization table"
                     : "tensor blob: a quantization table is allowed only with the QUANTIZED "
                       "layout");
  if (out.layout == Layout::quantized) {
    const fbs::Quantization* fq = h->quantization();
    Quantization q;
    switch (fq->scheme()) {
      case fbs::QuantScheme::AFFINE_PER_TENSOR:
        q.scheme = QuantScheme::affine_per_tensor;
        break;
      case fbs::QuantScheme::AFFINE_PER_AXIS:
        q.scheme = QuantScheme::affine_per_axis;
        break;
      case fbs::QuantScheme::BLOCK_SYMMETRIC:
        q.scheme = QuantScheme::block_symmetric;
        break;
      default:
        throw Error(ErrorCode::unsupported, "tensor blob: quantization.scheme " +
                                                std::to_string(static_cast<int>(fq->scheme())) +
                                                " is not supported");
    }
    switch (fq->storage()) {
      case fbs::QuantStorage::INT8:
        q.storage = QuantStorage::int8;
        break;
      case fbs::QuantStorage::UINT8:
        q.storage = QuantStorage::uint8;
        break;
      case fbs::QuantStorage::INT4:
        q.storage = QuantStorage::int4;
        break;
      default:
        throw Error(ErrorCode::unsupported, "tensor blob: quantization.storage " +
                                                std::to_string(static_cast<int>(fq->storage())) +
                                                " is not supported");
    }
    q.scale = fq->scale();
    q.zero_point = fq->zero_point();
    q.axis = fq->axis();
    q.block_size = fq->block_size();
    if (q.scheme != QuantScheme::affine_per_tensor) {
      auto st = dtype_from_code(static_cast<std::uint32_t>(fq->scale_type()));
      if (!st)
        fail_corrupt("tensor blob: quantization.scale_type " +
                     std::to_string(static_cast<int>(fq->scale_type())) +
                     " is not a supported data type");
      q.scale_dtype = *st;
    }
    if (out.nnz != 0) fail_corrupt("tensor blob: nnz must be 0 for a quantized tensor");
    try {
      detail::QuantLengths lengths = detail::check_quantization_header(q, out.dtype, out.shape);
      want_values = lengths.values;
      want_scales = lengths.scales;
      want_zero_points = lengths.zero_points;
    } catch (const Error& e) {
      fail_corrupt("tensor blob: " + e.message());
    }
    out.scales = seg(fq->scales());
    out.zero_points = seg(fq->zero_points());
    out.quantization = std::move(q);
  } else if (out.layout == Layout::dense) {
    if (out.nnz != 0) fail_corrupt("tensor blob: nnz must be 0 for a dense tensor");
    if (out.dtype == DType::utf8) {
      want_offsets = detail::checked_mul(detail::checked_add(numel, 1, "tensor blob: shape"), 8,
                                         "tensor blob: offsets");
      want_values = out.values.length;  // any length; validated by Tensor::strings
    } else {
      want_values = detail::checked_mul(numel, width, "tensor blob: values");
    }
  } else {
    if (out.dtype == DType::utf8)
      fail_corrupt("tensor blob: sparse tensors of strings are not supported");
    if (out.dtype == DType::float8_e8m0fnu || out.dtype == DType::float4_e2m1fn_x2)
      fail_corrupt("tensor blob: sparse " + std::string(dtype_name(out.dtype)) +
                   " tensors are not allowed (FORMAT.md section 6)");
    if (out.nnz > numel)
      fail_corrupt("tensor blob: nnz " + std::to_string(out.nnz) + " exceeds the element count");
    want_values = detail::checked_mul(out.nnz, width, "tensor blob: values");
    want_indices =
        detail::checked_mul(detail::checked_mul(out.nnz, out.shape.size(), "tensor blob: indices"),
                            8, "tensor blob: indices");
  }
  const std::pair<const char*, std::pair<Segment, std::uint64_t>> checks[] = {
      {"values", {out.values, want_values}},
      {"offsets", {out.offsets, want_offsets}},
      {"indices", {out.indices, want_indices}},
      {"quantization.scales", {out.scales, want_scales}},
      {"quantization.zero_points", {out.zero_points, want_zero_points}}};
  std::vector<Segment> used;
  for (const auto& [name, sw] : checks) {
    const auto& [s, want] = sw;
    if (s.length != want)
      fail_corrupt("tensor blob: " + std::string(name) + " segment holds " +
                   std::to_string(s.length) + " bytes, the header implies " + std::to_string(want));
    if (s.length == 0) continue;
    if (s.offset % alignment != 0)
      fail_corrupt("tensor blob: " + std::string(name) + " segment offset " +
                   std::to_string(s.offset) + " is not a multiple of " + std::to_string(alignment));
    if (s.offset < header_end || !detail::range_fits(s.offset, s.length, entry_size))
      fail_corrupt("tensor blob: " + std::string(name) + " segment " + segment_text(s) +
                   " is outside the data area [" + std::to_string(header_end) + ", " +
                   std::to_string(entry_size) + ")");
    used.push_back(s);
  }
  std::sort(used.begin(), used.end(), [](auto& a, auto& b) { return a.offset < b.offset; });
  for (std::size_t i = 1; i < used.size(); ++i)
    if (used[i].offset < used[i - 1].offset + used[i - 1].length)
      fail_corrupt("tensor blob: segments " + segment_text(used[i - 1]) + " and " +
                   segment_text(used[i]) + " overlap");
  return out;
}

Tensor decode_tensor_blob(const Bytes& entry, const Limits& limits) {
  BlobHeader h = read_blob_header(entry.span(), entry.size(), limits);
  const std::size_t width = h.dtype == DType::utf8 ? 1 : dtype_size(h.dtype);
  auto segment = [&](const Segment& s) {
    return s.length ? entry.slice(s.offset, s.length) : Bytes();
  };
  Bytes values = segment(h.values);
  Bytes offsets = segment(h.offsets);
  Bytes indices = segment(h.indices);
  if (h.quantization) {
    Quantization q = std::move(*h.quantization);
    q.scales = segment(h.scales);
    q.zero_points = segment(h.zero_points);
    if (h.big_endian && q.scheme != QuantScheme::affine_per_tensor) {
      q.scales = modelzip::detail::byteswapped(q.scales.span(), dtype_size(q.scale_dtype));
      q.zero_points = modelzip::detail::byteswapped(q.zero_points.span(), 8);
    }
    try {
      return Tensor::quantized(h.dtype, std::move(h.shape), std::move(q), values);
    } catch (const Error& e) {
      fail_corrupt("tensor blob: " + e.message());
    }
  }
  if (h.big_endian) {
    // Complex elements swap each part on its own (FORMAT.md section 6).
    if (width > 1)
      values =
          modelzip::detail::byteswapped(values.span(), modelzip::detail::byte_swap_unit(h.dtype));
    offsets = modelzip::detail::byteswapped(offsets.span(), 8);
    indices = modelzip::detail::byteswapped(indices.span(), 8);
  }
  values = aligned(values, width);
  offsets = aligned(offsets, 8);
  indices = aligned(indices, 8);
  try {
    if (h.layout == Layout::sparse_coo)
      return Tensor::sparse_coo(h.dtype, std::move(h.shape), h.nnz, indices, values);
    if (h.dtype == DType::utf8) return Tensor::strings(std::move(h.shape), offsets, values);
    return Tensor::dense(h.dtype, std::move(h.shape), values);
  } catch (const Error& e) {
    fail_corrupt("tensor blob: " + e.message());
  }
}

}  // namespace modelzip::format
