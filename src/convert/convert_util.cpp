#include "convert/convert_util.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/checked.hpp"
#include "io/durable_file.hpp"

namespace modelzip::convert::detail {

std::string shape_text(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Bytes aligned_slice(const Bytes& data, std::uint64_t offset, std::uint64_t length,
                    std::size_t alignment) {
  Bytes view = data.slice(offset, length);
  if (alignment <= 1 || reinterpret_cast<std::uintptr_t>(view.data()) % alignment == 0) return view;
  return view.to_owned();  // operator new memory: aligned for every element type
}

Bytes byteswapped(std::span<const std::byte> data, std::size_t element_size) {
  std::vector<std::byte> out(data.begin(), data.end());
  if (element_size > 1)
    for (std::size_t i = 0; i + element_size <= out.size(); i += element_size)
      std::reverse(out.begin() + static_cast<std::ptrdiff_t>(i),
                   out.begin() + static_cast<std::ptrdiff_t>(i + element_size));
  return Bytes::take(std::move(out));
}

namespace {

// Copies column-major `src` into row-major `dst`, elements of N bytes (of
// `runtime_size` bytes when N is 0).
template <std::size_t N>
void transpose_elements(const std::byte* src, std::byte* dst, std::span<const std::int64_t> shape,
                        std::size_t runtime_size) {
  const std::size_t size = N ? N : runtime_size;
  const std::size_t rank = shape.size();
  std::vector<std::uint64_t> stride(rank), index(rank, 0);
  std::uint64_t s = 1;
  for (std::size_t k = 0; k < rank; ++k) {
    stride[k] = s;
    s *= static_cast<std::uint64_t>(shape[k]);
  }
  const std::uint64_t numel = s;
  const std::uint64_t inner = static_cast<std::uint64_t>(shape[rank - 1]);
  const std::uint64_t inner_stride = stride[rank - 1];
  std::uint64_t source = 0;  // element index in src of the current row start
  for (std::uint64_t out = 0; out < numel; out += inner) {
    for (std::uint64_t i = 0; i < inner; ++i)
      std::memcpy(dst + (out + i) * size, src + (source + i * inner_stride) * size, size);
    // Advance the row index (dimensions 0..rank-2), last fastest.
    for (std::size_t k = rank - 1; k-- > 0;) {
      if (++index[k] < static_cast<std::uint64_t>(shape[k])) {
        source += stride[k];
        break;
      }
      source -= stride[k] * (index[k] - 1);
      index[k] = 0;
    }
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

void write_file_atomically(const std::filesystem::path& path,
                           const std::function<void(std::ostream&)>& write) {
  io::TempFile temp = io::TempFile::beside(path);
  {
    std::ofstream out(temp.path(), std::ios::binary | std::ios::trunc);
    if (!out)
      throw Error(ErrorCode::io, "cannot create a temporary file beside the target",
                  ErrorContext{.archive = path.string()});
    try {
      write(out);
      out.flush();
      if (!out) throw Error(ErrorCode::io, "cannot write the file");
    } catch (const Error& e) {
      throw e.with_context({.archive = path.string()});
    }
    out.close();
    if (out.fail())
      throw Error(ErrorCode::io, "cannot close the file", ErrorContext{.archive = path.string()});
  }
  temp.commit(true);
}

Error name_error(const Error& e, std::string_view tensor_name) {
  return Error(e.code(), "tensor '" + std::string(tensor_name) + "': " + e.message(), e.context());
}

void unsupported_tensor(std::string_view format, std::string_view tensor_name,
                        std::string_view problem) {
  throw Error(ErrorCode::unsupported, std::string(format) + " cannot hold tensor '" +
                                          std::string(tensor_name) + "': " + std::string(problem));
}

void check_unique_names(std::span<const NamedTensor> tensors, std::string_view format) {
  std::vector<std::string_view> names;
  names.reserve(tensors.size());
  for (const auto& t : tensors) names.push_back(t.name);
  std::sort(names.begin(), names.end());
  auto dup = std::adjacent_find(names.begin(), names.end());
  if (dup != names.end())
    throw Error(ErrorCode::invalid_argument,
                std::string(format) + ": duplicate tensor name '" + std::string(*dup) + "'");
}

}  // namespace modelzip::convert::detail
