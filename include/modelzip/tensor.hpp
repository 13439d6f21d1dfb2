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

#include <concepts>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
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

  // The accessors that return a reference into the Tensor return a copy
  // when called on an rvalue (a temporary, as in
  // `for (auto d : archive.tensor("w").shape())`): the copy outlives it.
  // A copy of a Bytes shares its memory (views stay views), and its span()
  // keeps that memory alive (`archive.tensor("w").values().span()`).
  DType dtype() const noexcept { return dtype_; }
  const Shape& shape() const& noexcept { return shape_; }
  Shape shape() const&& { return shape_; }
  std::size_t rank() const noexcept { return shape_.size(); }
  Layout layout() const noexcept { return layout_; }
  std::uint64_t numel() const;                         // product of the shape (dense element count)
  std::uint64_t nnz() const noexcept { return nnz_; }  // sparse only

  const Bytes& values() const& noexcept { return values_; }
  Bytes values() const&& noexcept { return values_; }
  const Bytes& offsets() const& noexcept { return offsets_; }  // utf8 only
  Bytes offsets() const&& noexcept { return offsets_; }
  const Bytes& indices() const& noexcept { return indices_; }  // sparse only
  Bytes indices() const&& noexcept { return indices_; }
  // How the integers of a quantized tensor map to values; nullptr unless
  // layout() is Layout::quantized. Valid as long as the Tensor. Called on
  // a temporary Tensor (`archive.tensor("w").quantization()`), a copy
  // (nullopt unless quantized), which outlives it; its scales and zero
  // points share their memory, as copies of a Bytes do.
  const Quantization* quantization() const& noexcept {
    return quantization_ ? &*quantization_ : nullptr;
  }
  std::optional<Quantization> quantization() const&& { return quantization_; }

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
  // or out of range. Called on a temporary Tensor, a view that keeps the
  // values alive (KeptView, modelzip/bytes.hpp).
  std::string_view string_at(std::uint64_t index) const&;
  KeptView<std::string_view> string_at(std::uint64_t index) const&& {
    return {string_at(index), values_};
  }

  // Typed zero-copy view of the values (numel() elements of a dense tensor,
  // nnz() of a sparse one). T must be the dtype's element type, exactly:
  //
  //   float32, float64             float, double
  //   complex64, complex128        std::complex<float>, std::complex<double>
  //   int8, int16, int32, int64    std::int8_t, ..., std::int64_t
  //   uint8, uint16, uint32, uint64  std::uint8_t, ..., std::uint64_t
  //   float16, bfloat16            std::uint16_t (the bits)
  //   float8_e4m3fn, float8_e5m2,  std::uint8_t (the bits)
  //   float8_e8m0fnu
  //   float4_e2m1fn_x2             std::uint8_t: one byte per element, each
  //                                a pair of FP4 values (first in the low
  //                                nibble); numel() counts the pairs
  //   bool                         std::uint8_t (one byte each; 0 is false,
  //                                anything else true: readers do not check
  //                                the bytes, and a bool object holding
  //                                other than 0 or 1 is undefined behaviour)
  //   utf8                         not viewable: use string_at()
  //   quantized (any original)     the stored integers: std::int8_t for int8
  //                                and int4 storage (int4: packed pairs, see
  //                                quant_value_at()), std::uint8_t for uint8;
  //                                dequantize() gives the values
  //
  // complex64 and complex128 are laid out as std::complex is (real part, then
  // imaginary part). A T that is no dtype's element type (bool, char, long
  // double, std::byte, ...) does not compile; for the raw bytes of any tensor
  // use values(). The span views the values' memory: it is valid while a
  // Bytes holding it lives (this Tensor, a copy of it, or for zero-copy reads
  // the Archive whose mapping it is). Called on a temporary Tensor (as in
  // `for (float x : archive.tensor("w").as<float>())`), as() returns a
  // KeptView (modelzip/bytes.hpp): the span and a share of the memory,
  // which lives as long as it does; a std::span taken from that is again
  // valid only while another owner lives. Throws Error(invalid_argument)
  // naming both types when T is another dtype's element type (e.g.
  // as<std::int32_t>() of a float32 tensor), and when the data is misaligned
  // for T.
  template <class T>
  std::span<const T> as() const& {
    check_view(view_type<T>(), alignof(T));
    return {reinterpret_cast<const T*>(values_.data()), values_.size() / sizeof(T)};
  }
  template <class T>
  KeptView<std::span<const T>> as() const&& {
    return {as<T>(), values_};
  }

  // A deep copy whose bytes are owned (not views into any mapping).
  Tensor to_owned() const;

  // Same dtype, shape, layout and bytes.
  bool operator==(const Tensor& other) const;

 private:
  // The element types as<T>() accepts, one per distinct C++ type.
  enum class ViewType : std::uint8_t { i8, i16, i32, i64, u8, u16, u32, u64, f32, f64, c64, c128 };
  // T's ViewType; does not compile for any other T. std::complex is
  // recognized by its interface (value_type float or double, real() and
  // imag(), two parts in size) so that this header need not include
  // <complex>.
  template <class T>
  static constexpr ViewType view_type() {
    using U = std::remove_cv_t<T>;
    if constexpr (std::is_same_v<U, std::int8_t>)
      return ViewType::i8;
    else if constexpr (std::is_same_v<U, std::int16_t>)
      return ViewType::i16;
    else if constexpr (std::is_same_v<U, std::int32_t>)
      return ViewType::i32;
    else if constexpr (std::is_same_v<U, std::int64_t>)
      return ViewType::i64;
    else if constexpr (std::is_same_v<U, std::uint8_t>)
      return ViewType::u8;
    else if constexpr (std::is_same_v<U, std::uint16_t>)
      return ViewType::u16;
    else if constexpr (std::is_same_v<U, std::uint32_t>)
      return ViewType::u32;
    else if constexpr (std::is_same_v<U, std::uint64_t>)
      return ViewType::u64;
    else if constexpr (std::is_same_v<U, float>)
      return ViewType::f32;
    else if constexpr (std::is_same_v<U, double>)
      return ViewType::f64;
    else if constexpr (complex_of<U, float>())
      return ViewType::c64;
    else if constexpr (complex_of<U, double>())
      return ViewType::c128;
    else {
      static_assert(sizeof(T) == 0,
                    "Tensor::as<T>(): T is no dtype's element type (see the table at as(); "
                    "bool tensors view as std::uint8_t, raw bytes are values())");
      return ViewType::u8;  // not reached: keeps the assertion the only error
    }
  }
  template <class T, class Part>
  static constexpr bool complex_of() {
    if constexpr (requires(const T& c) {
                    typename T::value_type;
                    { c.real() } -> std::same_as<Part>;
                    { c.imag() } -> std::same_as<Part>;
                  })
      return std::is_same_v<typename T::value_type, Part> && sizeof(T) == 2 * sizeof(Part);
    else
      return false;
  }

  void check_view(ViewType type, std::size_t alignment) const;

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
