// Helpers shared by the tensor file format converters: zero-copy or aligned
// copies of tensor bytes, column-major to row-major copies,
// error wrapping. (Crash-safe file output: io/atomic_write.hpp.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>

#include "core/shape_text.hpp"
#include "modelzip/bytes.hpp"
#include "modelzip/convert.hpp"
#include "modelzip/error.hpp"
#include "modelzip/limits.hpp"
#include "modelzip/tensor.hpp"

namespace modelzip::convert::detail {

using modelzip::detail::shape_text;

// [offset, offset + length) of `data` as a zero-copy slice when its first
// byte is aligned to `alignment`, else as an owned (suitably aligned) copy.
// Precondition: the range lies inside `data`.
Bytes aligned_slice(const Bytes& data, std::uint64_t offset, std::uint64_t length,
                    std::size_t alignment);

// The row-major (C order) copy of column-major (Fortran order) `data` of
// `shape`, elements of `element_size` bytes. data.size() must equal
// numel * element_size.
Bytes fortran_to_c_order(std::span<const std::byte> data, std::span<const std::int64_t> shape,
                         std::size_t element_size);

// numel(shape) * element_size, or Error(corrupt, what...) on overflow or a
// dimension above INT64_MAX (already excluded by int64_t shapes).
std::uint64_t checked_byte_size(std::span<const std::int64_t> shape, std::uint64_t element_size,
                                std::string_view what);

// Error(limit_exceeded) when `rank` exceeds limits.max_rank.
void check_rank(std::uint64_t rank, const Limits& limits, std::string_view what,
                std::uint64_t offset);

// Builds a tensor through `make`, turning Error(invalid_argument) from the
// Tensor factories into Error(corrupt, what: ...) at `offset`.
Tensor build_tensor(const std::function<Tensor()>& make, std::string_view what,
                    std::uint64_t offset);

// Writes `bytes` to `out`; Error(io) if the stream fails.
void write_bytes(std::ostream& out, std::span<const std::byte> bytes);
void write_bytes(std::ostream& out, std::string_view bytes);

// "tensor 'name': " + message, keeping the code and context of `e`.
Error name_error(const Error& e, std::string_view tensor_name);

// What `read()` returns; an Error it throws is rethrown naming `source` as
// ErrorContext::archive (unless it names one already). For the readers'
// forms that take a source.
template <class Read>
auto read_from(std::string_view source, Read&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const Error& e) {
    throw e.with_context({.archive = std::string(source)});
  }
}

// Error(unsupported) naming the tensor and what the format cannot hold.
[[noreturn]] void unsupported_tensor(std::string_view format, std::string_view tensor_name,
                                     std::string_view problem);

// Error(invalid_argument) naming the first duplicate name, if any.
void check_unique_names(std::span<const NamedTensor> tensors, std::string_view format);

// A tensor given by its header fields and a callback that writes exactly
// `nbytes` element bytes: for writers that stream tensors larger than memory
// (modelzip export).
struct StreamedTensor {
  std::string name;
  DType dtype = DType::float32;
  Shape shape;
  Layout layout = Layout::dense;
  std::uint64_t nbytes = 0;
  std::function<void(std::ostream&)> write;
};

// write_safetensors (the same file, byte for byte) from StreamedTensors: the
// header needs only their sizes, then each one writes its bytes in turn.
void write_safetensors_streamed(const std::filesystem::path& path,
                                std::span<const StreamedTensor> tensors,
                                const StringMap& metadata = {});
// write_npz (the same file) from dense StreamedTensors, in bounded memory.
void write_npz_streamed(const std::filesystem::path& path, std::span<const StreamedTensor> tensors);
// write_btf (the same file) from dense StreamedTensors.
void write_btf_streamed(const std::filesystem::path& path, std::span<const StreamedTensor> tensors);

}  // namespace modelzip::convert::detail
