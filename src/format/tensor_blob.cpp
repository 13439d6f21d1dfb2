#include "format/tensor_blob.hpp"

#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/checked.hpp"
#include "core/flatbuffer_alignment.hpp"
#include "modelzip/error.hpp"
#include "tensor_generated.h"

namespace modelzip::format {
namespace {

namespace fbs = modelzip::fb;

[[noreturn]] void corrupt(const std::string& what, std::optional<std::uint64_t> offset = {}) {
  throw Error(ErrorCode::corrupt, "tensor blob: " + what, ErrorContext{.offset = offset});
}

Bytes zero_padding(std::uint64_t n) {
  static const std::vector<std::byte> zeros(4096);
  if (n <= zeros.size()) return Bytes::borrow(std::span(zeros.data(), n), nullptr);
  return Bytes::take(std::vector<std::byte>(n));
}

std::string segment_text(const Segment& s) {
  return "[" + std::to_string(s.offset) + ", +" + std::to_string(s.length) + ")";
}

// Reverses the bytes of every `width`-byte element (big-endian input).
Bytes byteswapped(const Bytes& in, std::size_t width) {
  std::vector<std::byte> out(in.size());
  for (std::size_t i = 0; i + width <= in.size(); i += width)
    for (std::size_t k = 0; k < width; ++k) out[i + k] = in.data()[i + width - 1 - k];
  return Bytes::take(std::move(out));
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
  std::array<Segment, 3> segs;  // values, offsets, indices
};

// The header of a blob with segments of the given lengths.
EncodedHeader encode_header(DType dtype, const Shape& shape_dims, Layout layout, std::uint64_t nnz,
                            std::uint64_t n_values, std::uint64_t n_offsets,
                            std::uint64_t n_indices) {
  flatbuffers::FlatBufferBuilder fbb(256);
  // The header size does not depend on the segment offsets (fixed-size
  // structs), so build once with placeholders to learn it, then for real.
  auto build = [&](std::uint64_t first) {
    fbb.Clear();
    auto shape = fbb.CreateVector(shape_dims);
    // Non-empty segments follow each other at aligned offsets; an empty
    // segment is written as {0, 0}.
    std::uint64_t pos = first;
    auto place = [&](std::uint64_t length) {
      if (length == 0) return Segment{0, 0};
      Segment s{detail::align_up(pos, kSegmentAlignment), length};
      pos = s.offset + s.length;
      return s;
    };
    Segment v = place(n_values);
    Segment o = place(n_offsets);
    Segment ix = place(n_indices);
    fbs::Segment values_seg(v.offset, v.length), offsets_seg(o.offset, o.length),
        indices_seg(ix.offset, ix.length);
    fbs::TensorHeaderBuilder h(fbb);
    h.add_dtype(static_cast<fbs::DataType>(dtype));
    h.add_shape(shape);
    h.add_layout(layout == Layout::dense ? fbs::Layout::DENSE : fbs::Layout::SPARSE_COO);
    h.add_byte_order(fbs::ByteOrder::LITTLE);
    h.add_values(&values_seg);
    h.add_offsets(&offsets_seg);
    h.add_indices(&indices_seg);
    h.add_nnz(nnz);
    h.add_alignment(static_cast<std::uint32_t>(kSegmentAlignment));
    fbb.FinishSizePrefixed(h.Finish(), fbs::TensorHeaderIdentifier());
    return std::array<Segment, 3>{v, o, ix};
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
  EncodedHeader h = encode_header(t.dtype(), t.shape(), t.layout(), t.nnz(), t.values().size(),
                                  t.offsets().size(), t.indices().size());
  EncodedBlob blob;
  blob.pieces.push_back(h.bytes);
  std::uint64_t pos = h.bytes.size();
  const Bytes* data[3] = {&t.values(), &t.offsets(), &t.indices()};
  for (int i = 0; i < 3; ++i) {
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
  EncodedHeader h = encode_header(dtype, shape, Layout::dense, 0, n, 0, 0);
  DenseBlobLayout out;
  out.header = h.bytes;
  out.values_offset = n == 0 ? h.bytes.size() : h.segs[0].offset;
  out.size = n == 0 ? h.bytes.size() : h.segs[0].offset + n;
  return out;
}

std::uint64_t blob_header_size(std::span<const std::byte> prefix, std::uint64_t entry_size,
                               const Limits& limits) {
  if (prefix.size() < 4 || entry_size < 4) corrupt("shorter than its 4-byte size prefix", 0);
  std::uint64_t s = detail::load_le<std::uint32_t>(prefix.data());
  if (s > limits.max_flatbuffer_bytes)
    throw Error(ErrorCode::limit_exceeded,
                "tensor blob: header of " + std::to_string(s) + " bytes exceeds the limit of " +
                    std::to_string(limits.max_flatbuffer_bytes),
                ErrorContext{.offset = 0});
  if (s + 4 > entry_size)
    corrupt("header size " + std::to_string(s) + " exceeds the entry (" +
                std::to_string(entry_size) + " bytes)",
            0);
  return s + 4;
}

BlobHeader read_blob_header(std::span<const std::byte> prefix, std::uint64_t entry_size,
                            const Limits& limits) {
  const std::uint64_t header_end = blob_header_size(prefix, entry_size, limits);
  if (prefix.size() < header_end) corrupt("header is truncated", prefix.size());
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
    corrupt("header FlatBuffer fails verification (or lacks the MZTB identifier)", 4);
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
    corrupt("header FlatBuffer: shape elements are not 8-byte aligned",
            static_cast<std::uint64_t>(h->shape()->Data() - buf));
  if (h->shape()) {
    if (h->shape()->size() > limits.max_rank)
      throw Error(ErrorCode::limit_exceeded,
                  "tensor blob: rank " + std::to_string(h->shape()->size()) +
                      " exceeds the limit of " + std::to_string(limits.max_rank));
    out.shape.assign(h->shape()->begin(), h->shape()->end());
  }
  std::uint64_t numel = 1;
  for (auto d : out.shape) {
    if (d < 0) corrupt("negative dimension " + std::to_string(d));
    numel = detail::checked_mul(numel, static_cast<std::uint64_t>(d), "tensor blob: shape");
  }
  switch (h->layout()) {
    case fbs::Layout::DENSE:
      out.layout = Layout::dense;
      break;
    case fbs::Layout::SPARSE_COO:
      out.layout = Layout::sparse_coo;
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
    corrupt("alignment " + std::to_string(alignment) + " is not a power of two from 8 to 4096");
  auto seg = [](const fbs::Segment* s) {
    return s ? Segment{s->offset(), s->length()} : Segment{};
  };
  out.values = seg(h->values());
  out.offsets = seg(h->offsets());
  out.indices = seg(h->indices());
  out.nnz = h->nnz();

  // Sizes implied by dtype, shape and layout.
  const std::uint64_t width = dtype_size(out.dtype);
  std::uint64_t want_values = 0, want_offsets = 0, want_indices = 0;
  if (out.layout == Layout::dense) {
    if (out.nnz != 0) corrupt("nnz must be 0 for a dense tensor");
    if (out.dtype == DType::utf8) {
      want_offsets = detail::checked_mul(detail::checked_add(numel, 1, "tensor blob: shape"), 8,
                                         "tensor blob: offsets");
      want_values = out.values.length;  // any length; validated by Tensor::strings
    } else {
      want_values = detail::checked_mul(numel, width, "tensor blob: values");
    }
  } else {
    if (out.dtype == DType::utf8) corrupt("sparse tensors of strings are not supported");
    if (out.nnz > numel) corrupt("nnz " + std::to_string(out.nnz) + " exceeds the element count");
    want_values = detail::checked_mul(out.nnz, width, "tensor blob: values");
    want_indices =
        detail::checked_mul(detail::checked_mul(out.nnz, out.shape.size(), "tensor blob: indices"),
                            8, "tensor blob: indices");
  }
  const std::pair<const char*, std::pair<Segment, std::uint64_t>> checks[] = {
      {"values", {out.values, want_values}},
      {"offsets", {out.offsets, want_offsets}},
      {"indices", {out.indices, want_indices}}};
  std::vector<Segment> used;
  for (const auto& [name, sw] : checks) {
    const auto& [s, want] = sw;
    if (s.length != want)
      corrupt(std::string(name) + " segment holds " + std::to_string(s.length) +
              " bytes, the header implies " + std::to_string(want));
    if (s.length == 0) continue;
    if (s.offset % alignment != 0)
      corrupt(std::string(name) + " segment offset " + std::to_string(s.offset) +
              " is not a multiple of " + std::to_string(alignment));
    if (s.offset < header_end || !detail::range_fits(s.offset, s.length, entry_size))
      corrupt(std::string(name) + " segment " + segment_text(s) + " is outside the data area [" +
              std::to_string(header_end) + ", " + std::to_string(entry_size) + ")");
    used.push_back(s);
  }
  std::sort(used.begin(), used.end(), [](auto& a, auto& b) { return a.offset < b.offset; });
  for (std::size_t i = 1; i < used.size(); ++i)
    if (used[i].offset < used[i - 1].offset + used[i - 1].length)
      corrupt("segments " + segment_text(used[i - 1]) + " and " + segment_text(used[i]) +
              " overlap");
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
  if (h.big_endian) {
    if (width > 1) values = byteswapped(values, width);
    offsets = byteswapped(offsets, 8);
    indices = byteswapped(indices, 8);
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
    corrupt(e.message());
  }
}

}  // namespace modelzip::format
