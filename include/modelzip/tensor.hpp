// Tensor: a typed, shaped n-dimensional array whose bytes live in Bytes
// buffers (owned, or zero-copy views into a mapped archive).
//
// Layouts:
//  - dense:      `values` holds numel() elements, row-major (C order),
//                little-endian. For DType::utf8, `values` holds the
//                concatenated UTF-8 strings and `offsets` holds numel()+1
//                little-endian uint64 offsets into `values` (first 0, last
//                values.size(), non-decreasing).
//  - sparse_coo: `indices` holds nnz x rank little-endian int64 coordinates
//                (row-major: one row of `rank` coordinates per value) and
//                `values` holds nnz elements. utf8 is not allowed.
//  - quantized:  `values` holds the stored integers of a quantized tensor
//                (row-major; one byte per element, or two int4 elements per
//                byte); dtype() is the original floating-point type the
//                integers stand for, and quantization() says how
//                (modelzip/quantization.hpp). dequantize() gives the floats.
//
// Shapes: rank 0 (scalar, numel 1) to any rank; zero-size dimensions are
// allowed (numel 0). Dimensions are non-negative.
//
// A Tensor is a cheap-to-copy value: copies share the same Bytes. Thread
// safety: immutable, safe to share between threads.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "modelzip/bytes.hpp"
#include "modelzip/dtype.hpp"
#include "modelzip/export.hpp"
#include "modelzip/quantization.hpp"

namespace modelzip {

enum class Layout : std::uint8_t { dense = 0, sparse_coo = 1, quantized = 2 };
MODELZIP_API std::string_view layout_name(Layout layout) noexcept;

using Shape = std::vector<std::int64_t>;

// Number of elements of `shape`; throws Error(invalid_argument) on a negative
// dimension or on overflow of uint64.
MODELZIP_API std::uint64_t shape_numel(std::span<const std::int64_t> shape);

class MODELZIP_API Tensor {
 public:
  Tensor() = default;

  // A dense tensor of a fixed-size type. `values.size()` must equal
  // numel * dtype_size. Throws Error(invalid_argument) otherwise.
  static Tensor dense(DType dtype, Shape shape, Bytes values);
  // A dense utf8 tensor from its strings (row-major). Copies the strings.
  static Tensor strings(Shape shape, std::span<const std::string> values);
  // A dense utf8 tensor from already encoded parts (validated: offsets
  // monotone and in range, every string valid UTF-8).
  static Tensor strings(Shape shape, Bytes offsets, Bytes values);
  // A sparse COO tensor; validates sizes and that every coordinate is inside
  // the shape.
  static Tensor sparse_coo(DType dtype, Shape shape, std::uint64_t nnz, Bytes indices,
                           Bytes values);
  // A quantized tensor standing for `original` values (float16, bfloat16,
  // float32 or float64) of `shape`: `values` holds the stored integers
  // (quant_values_bytes() bytes). Validates everything FORMAT.md section 6.1
  // requires (scheme and storage, axis, block size, counts, every scale
  // positive and finite, every zero point in range); throws
  // Error(invalid_argument) naming the field otherwise.
  static Tensor quantized(DType original, Shape shape, Quantization quantization, Bytes values);

  DType dtype() const noexcept { return dtype_; }
  const Shape& shape() const noexcept { return shape_; }
  std::size_t rank() const noexcept { return shape_.size(); }
  Layout layout() const noexcept { return layout_; }
  std::uint64_t numel() const;                         // product of the shape (dense element count)
  std::uint64_t nnz() const noexcept { return nnz_; }  // sparse only

  const Bytes& values() const noexcept { return values_; }
  const Bytes& offsets() const noexcept { return offsets_; }  // utf8 only
  const Bytes& indices() const noexcept { return indices_; }  // sparse only
  // How the integers of a quantized tensor map to values; nullptr unless
  // layout() is Layout::quantized. Valid as long as the Tensor.
  const Quantization* quantization() const noexcept {
    return quantization_ ? &*quantization_ : nullptr;
  }

  // Total bytes held (values + offsets + indices + quantization scales and
  // zero points).
  std::uint64_t nbytes() const noexcept {
    return values_.size() + offsets_.size() + indices_.size() +
           (quantization_ ? quantization_->scales.size() + quantization_->zero_points.size() : 0);
  }

  // The values a quantized tensor stands for, as a dense tensor of `to`
  // (float16, bfloat16, float32 or float64; default: dtype(), the original
  // type), in owned memory (FORMAT.md section 6.1 gives the arithmetic). A
  // tensor that is not quantized is returned as it is when `to` is unset or
  // its dtype; anything else throws Error(invalid_argument).
  Tensor dequantize(std::optional<DType> to = std::nullopt) const;

  // The i-th string of a utf8 tensor (row-major index). Throws if not utf8
  // or out of range.
  std::string_view string_at(std::uint64_t index) const;

  // Typed view of the values. Throws Error(invalid_argument) if T does not
  // match the dtype's size or the data is misaligned for T. complex64 and
  // complex128 tensors view as std::complex<float> / std::complex<double>
  // (whose layout, real part then imaginary part, is theirs). For a quantized
  // tensor the values are bytes: T must be 1 byte (std::int8_t for int8
  // and int4 storage, std::uint8_t for uint8), a zero-copy view of the
  // stored integers (int4: packed pairs, see quant_value_at()).
  template <class T>
  std::span<const T> as() const {
    check_view(sizeof(T), alignof(T));
    return {reinterpret_cast<const T*>(values_.data()), values_.size() / sizeof(T)};
  }

  // A deep copy whose bytes are owned (not views into any mapping).
  Tensor to_owned() const;

  // Same dtype, shape, layout and bytes.
  bool operator==(const Tensor& other) const;

 private:
  void check_view(std::size_t element_size, std::size_t alignment) const;

  DType dtype_ = DType::float32;
  Shape shape_;
  Layout layout_ = Layout::dense;
  std::uint64_t nnz_ = 0;
  Bytes values_;
  Bytes offsets_;
  Bytes indices_;
  std::optional<Quantization> quantization_;
};

}  // namespace modelzip
