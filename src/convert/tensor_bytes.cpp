#include "convert/tensor_bytes.hpp"

#include <algorithm>
#include <cstring>
#include <ostream>
#include <vector>

#include "core/checked.hpp"
#include "core/printable.hpp"

namespace modelzip::convert::detail {

Bytes aligned_slice(const Bytes& data, std::uint64_t offset, std::uint64_t length,
                    std::size_t alignment) {
  Bytes view = data.slice(offset, length);
  if (alignment <= 1 || reinterpret_cast<std::uintptr_t>(view.data()) % alignment == 0) return view;
  return view.to_owned();  // operator new memory: aligned for every element type
}

namespace {

// Copies column-major `src` into row-major `dst`, elements of N bytes (of
// `runtime_size` bytes when N is 0). Rank >= 2.
//
// Element (i0, ..., ik) is at sum(i_j * in_stride_j) in `src` (in_stride_0 =
// 1) and at sum(i_j * out_stride_j) in `dst` (out_stride_k = 1). For each
// combination of the middle indices this is a 2-D transpose between axis 0
// (contiguous in src) and axis k (contiguous in dst), done in square tiles
// so that both sides stay in cache.
template <std::size_t N>
void transpose_elements(const std::byte* src, std::byte* dst, std::span<const std::int64_t> shape,
                        std::size_t runtime_size) {
  constexpr std::uint64_t kTile = 32;
  const std::size_t size = N ? N : runtime_size;
  const std::size_t rank = shape.size();
  std::vector<std::uint64_t> dim(rank), in_stride(rank), out_stride(rank);
  for (std::size_t k = 0; k < rank; ++k) dim[k] = static_cast<std::uint64_t>(shape[k]);
  in_stride[0] = 1;
  for (std::size_t k = 1; k < rank; ++k) in_stride[k] = in_stride[k - 1] * dim[k - 1];
  out_stride[rank - 1] = 1;
  for (std::size_t k = rank - 1; k-- > 0;) out_stride[k] = out_stride[k + 1] * dim[k + 1];
  const std::uint64_t rows = dim[0], cols = dim[rank - 1];
  const std::uint64_t row_out = out_stride[0], col_in = in_stride[rank - 1];

  std::vector<std::uint64_t> middle(rank, 0);  // indices of axes 1..rank-2
  std::uint64_t in_base = 0, out_base = 0;
  for (;;) {
    for (std::uint64_t r0 = 0; r0 < rows; r0 += kTile) {
      const std::uint64_t r1 = std::min(rows, r0 + kTile);
      for (std::uint64_t c0 = 0; c0 < cols; c0 += kTile) {
        const std::uint64_t c1 = std::min(cols, c0 + kTile);
        for (std::uint64_t r = r0; r < r1; ++r) {
          std::byte* out = dst + (out_base + r * row_out) * size;
          const std::byte* in = src + (in_base + r) * size;
          for (std::uint64_t c = c0; c < c1; ++c)
            std::memcpy(out + c * size, in + c * col_in * size, size);
        }
      }
    }
    // Next combination of the middle indices (last fastest).
    std::size_t k = rank - 1;
    while (k-- > 1) {
      if (++middle[k] < dim[k]) {
        in_base += in_stride[k];
        out_base += out_stride[k];
        break;
      }
      in_base -= in_stride[k] * (dim[k] - 1);
      out_base -= out_stride[k] * (dim[k] - 1);
      middle[k] = 0;
    }
    if (k == 0) return;
  }
}

}  // namespace

Bytes fortran_to_c_order(std::span<const std::byte> data, std::span<const std::int64_t> shape,
                         std::size_t element_size) {
  std::vector<std::byte> out(data.size());
  if (shape.size() <= 1 || data.empty()) {
    std::copy(data.begin(), data.end(), out.begin());
    return Bytes::take(std::move(out));
  }
  switch (element_size) {
    case 1:
      transpose_elements<1>(data.data(), out.data(), shape, 1);
      break;
    case 2:
      transpose_elements<2>(data.data(), out.data(), shape, 2);
      break;
    case 4:
      transpose_elements<4>(data.data(), out.data(), shape, 4);
      break;
    case 8:
      transpose_elements<8>(data.data(), out.data(), shape, 8);
      break;
    default:
      transpose_elements<0>(data.data(), out.data(), shape, element_size);
  }
  return Bytes::take(std::move(out));
}

std::uint64_t checked_byte_size(std::span<const std::int64_t> shape, std::uint64_t element_size,
                                std::string_view what) {
  std::uint64_t n = element_size;
  for (std::int64_t d : shape) {
    if (d < 0)
      throw Error(ErrorCode::corrupt,
                  std::string(what) + ": negative dimension " + std::to_string(d));
    n = modelzip::detail::checked_mul(n, static_cast<std::uint64_t>(d), what);
  }
  // Zero-size element types (none here) or zero dimensions give 0: fine.
  return n;
}

void check_rank(std::uint64_t rank, const Limits& limits, std::string_view what,
                std::uint64_t offset) {
  if (rank > limits.max_rank)
    throw Error(ErrorCode::limit_exceeded,
                std::string(what) + ": rank " + std::to_string(rank) + " exceeds the limit " +
                    std::to_string(limits.max_rank),
                ErrorContext{.offset = offset});
}

Tensor build_tensor(const std::function<Tensor()>& make, std::string_view what,
                    std::uint64_t offset) {
  try {
    return make();
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_argument) throw;
    throw Error(ErrorCode::corrupt, std::string(what) + ": " + e.message(),
                ErrorContext{.offset = offset});
  }
}

void write_bytes(std::ostream& out, std::span<const std::byte> bytes) {
  const char* p = reinterpret_cast<const char*>(bytes.data());
  std::size_t left = bytes.size();
  while (left > 0 && out) {
    const std::size_t n = std::min<std::size_t>(left, std::size_t{1} << 30);
    out.write(p, static_cast<std::streamsize>(n));
    p += n;
    left -= n;
  }
  if (!out) throw Error(ErrorCode::io, "cannot write to the output stream");
}

void write_bytes(std::ostream& out, std::string_view bytes) {
  write_bytes(out, std::as_bytes(std::span(bytes.data(), bytes.size())));
}

Error name_error(const Error& e, std::string_view tensor_name) {
  return e.reworded("tensor " + modelzip::detail::quote_name(tensor_name) + ": " + e.message(),
                    e.context());
}

void unsupported_tensor(std::string_view format, std::string_view tensor_name,
                        std::string_view problem) {
  throw Error(ErrorCode::unsupported, std::string(format) + " cannot hold tensor " +
                                          modelzip::detail::quote_name(tensor_name) + ": " +
                                          std::string(problem));
}

void check_unique_names(std::span<const NamedTensor> tensors, std::string_view format) {
  std::vector<std::string_view> names;
  names.reserve(tensors.size());
  for (const auto& t : tensors) names.push_back(t.name);
  std::sort(names.begin(), names.end());
  auto dup = std::adjacent_find(names.begin(), names.end());
  if (dup != names.end())
    throw Error(ErrorCode::invalid_argument, std::string(format) + ": duplicate tensor name " +
                                                 modelzip::detail::quote_name(*dup));
}

}  // namespace modelzip::convert::detail
