#include "modelzip/tensor.hpp"

#include <cstring>
#include <utility>

#include "core/checked.hpp"
#include "core/dtype_article.hpp"
#include "core/fail.hpp"
#include "core/kept_symbol.hpp"
#include "core/quantization_rules.hpp"
#include "core/shape_text.hpp"
#include "core/utf8.hpp"
#include "modelzip/error.hpp"

namespace modelzip {
namespace {

using detail::dtype_with_article;
using detail::shape_text;

using modelzip::detail::fail_invalid;

}  // namespace

std::string_view layout_name(Layout layout) noexcept {
  switch (layout) {
    case Layout::dense:
      return "dense";
    case Layout::sparse_coo:
      return "sparse_coo";
    case Layout::quantized:
      return "quantized";
  }
  return "unknown";
}

std::uint64_t shape_numel(std::span<const std::int64_t> shape) {
  std::uint64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) fail_invalid("negative dimension " + std::to_string(d));
    if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(d), &n))
      fail_invalid("shape has more than 2^64 elements");
  }
  return n;
}

std::uint64_t Tensor::numel() const {
  return shape_numel(shape_);
}

Tensor Tensor::dense(DType dtype, Shape shape, Bytes values) {
  if (dtype == DType::utf8) fail_invalid("dense utf8 tensors are built with Tensor::strings");
  std::uint64_t n = shape_numel(shape);
  std::uint64_t expected;
  if (__builtin_mul_overflow(n, dtype_size(dtype), &expected))
    fail_invalid("tensor byte size overflows 64 bits");
  if (values.size() != expected)
    fail_invalid(dtype_with_article(dtype) + " tensor of shape " + shape_text(shape) + " needs " +
                 std::to_string(expected) + " bytes, got " + std::to_string(values.size()));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.values_ = std::move(values);
  return t;
}

Tensor Tensor::strings(Shape shape, std::span<const std::string> values) {
  std::uint64_t n = shape_numel(shape);
  if (n != values.size())
    fail_invalid("shape " + shape_text(shape) + " holds " + std::to_string(n) + " strings, got " +
                 std::to_string(values.size()));
  std::vector<std::byte> offsets((values.size() + 1) * sizeof(std::uint64_t));
  std::string joined;
  std::uint64_t pos = 0;
  detail::store_le<std::uint64_t>(offsets.data(), 0);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (auto bad = detail::utf8_invalid_at(values[i]))
      fail_invalid("string " + std::to_string(i) + " is not valid UTF-8 at byte " +
                   std::to_string(*bad));
    joined += values[i];
    pos += values[i].size();
    detail::store_le<std::uint64_t>(offsets.data() + (i + 1) * 8, pos);
  }
  Tensor t;
  t.dtype_ = DType::utf8;
  t.shape_ = std::move(shape);
  t.offsets_ = Bytes::take(std::move(offsets));
  t.values_ = Bytes::copy_of(joined);
  return t;
}

Tensor Tensor::strings(Shape shape, Bytes offsets, Bytes values) {
  std::uint64_t n = shape_numel(shape);
  if (n == UINT64_MAX || offsets.size() / 8 != n + 1 || offsets.size() % 8 != 0)
    fail_invalid("a string tensor of shape " + shape_text(shape) + " needs " +
                 std::to_string(n + 1) + " offsets");
  std::uint64_t prev = 0;
  for (std::uint64_t i = 0; i <= n; ++i) {
    auto off = detail::load_le<std::uint64_t>(offsets.data() + i * 8);
    if ((i == 0 && off != 0) || off < prev || off > values.size())
      fail_invalid("string offset " + std::to_string(i) + " (" + std::to_string(off) +
                   ") is not monotone within " + std::to_string(values.size()) + " bytes");
    if (i > 0) {
      std::string_view s(reinterpret_cast<const char*>(values.data()) + prev, off - prev);
      if (auto bad = detail::utf8_invalid_at(s))
        fail_invalid("string " + std::to_string(i - 1) + " is not valid UTF-8 at byte " +
                     std::to_string(*bad));
    }
    prev = off;
  }
  if (prev != values.size()) fail_invalid("the last string offset must equal the string bytes");
  Tensor t;
  t.dtype_ = DType::utf8;
  t.shape_ = std::move(shape);
  t.offsets_ = std::move(offsets);
  t.values_ = std::move(values);
  return t;
}

Tensor Tensor::sparse_coo(DType dtype, Shape shape, std::uint64_t nnz, Bytes indices,
                          Bytes values) {
  if (dtype == DType::utf8) fail_invalid("sparse tensors of strings are not supported");
  if (dtype == DType::float8_e8m0fnu || dtype == DType::float4_e2m1fn_x2)
    fail_invalid("sparse " + std::string(dtype_name(dtype)) +
                 " tensors are not supported (FORMAT.md section 6: COO sums repeated values and "
                 "reads 0 where none is stored, which this type cannot mean)");
  std::uint64_t n = shape_numel(shape);
  std::uint64_t rank = shape.size();
  std::uint64_t want_idx, want_val;
  if (__builtin_mul_overflow(nnz, rank, &want_idx) ||
      __builtin_mul_overflow(want_idx, 8, &want_idx) ||
      __builtin_mul_overflow(nnz, dtype_size(dtype), &want_val))
    fail_invalid("sparse tensor sizes overflow 64 bits");
  if (nnz > n) fail_invalid("sparse tensor has more values than elements");
  if (indices.size() != want_idx)
    fail_invalid("COO indices need " + std::to_string(want_idx) + " bytes, got " +
                 std::to_string(indices.size()));
  if (values.size() != want_val)
    fail_invalid("COO values need " + std::to_string(want_val) + " bytes, got " +
                 std::to_string(values.size()));
  for (std::uint64_t i = 0; i < nnz; ++i)
    for (std::uint64_t d = 0; d < rank; ++d) {
      auto c = detail::load_le<std::int64_t>(indices.data() + (i * rank + d) * 8);
      if (c < 0 || c >= shape[d])
        fail_invalid("COO coordinate " + std::to_string(c) + " of value " + std::to_string(i) +
                     " is outside dimension " + std::to_string(d) + " of size " +
                     std::to_string(shape[d]));
    }
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.layout_ = Layout::sparse_coo;
  t.nnz_ = nnz;
  t.indices_ = std::move(indices);
  t.values_ = std::move(values);
  return t;
}

Tensor Tensor::quantized(DType original, Shape shape, Quantization quantization, Bytes values) {
  detail::QuantLengths want = detail::check_quantization_header(quantization, original, shape);
  auto check = [](const char* field, std::uint64_t have, std::uint64_t need) {
    if (have != need)
      fail_invalid(std::string(field) + " holds " + std::to_string(have) +
                   " bytes, the shape and scheme imply " + std::to_string(need));
  };
  check("values", values.size(), want.values);
  check("quantization.scales", quantization.scales.size(), want.scales);
  check("quantization.zero_points", quantization.zero_points.size(), want.zero_points);
  detail::check_quantization_data(quantization, values, shape_numel(shape));
  Tensor t;
  t.dtype_ = original;
  t.shape_ = std::move(shape);
  t.layout_ = Layout::quantized;
  t.values_ = std::move(values);
  t.quantization_ = std::move(quantization);
  return t;
}

std::string_view Tensor::string_at(std::uint64_t index) const& {
  if (dtype_ != DType::utf8) fail_invalid("not a string tensor");
  if (index >= offsets_.size() / 8 - (offsets_.empty() ? 0 : 1) || offsets_.empty())
    fail_invalid("string index " + std::to_string(index) + " out of range");
  auto a = detail::load_le<std::uint64_t>(offsets_.data() + index * 8);
  auto b = detail::load_le<std::uint64_t>(offsets_.data() + (index + 1) * 8);
  return {reinterpret_cast<const char*>(values_.data()) + a, b - a};
}
// 0.1.0's unqualified form (core/kept_symbol.hpp).
MODELZIP_KEEP_SYMBOL(_ZNK8modelzip6Tensor9string_atEm, _ZNKR8modelzip6Tensor9string_atEm);

Tensor Tensor::to_owned() const {
  Tensor t = *this;
  t.values_ = values_.to_owned();
  t.offsets_ = offsets_.to_owned();
  t.indices_ = indices_.to_owned();
  if (t.quantization_) {
    t.quantization_->scales = t.quantization_->scales.to_owned();
    t.quantization_->zero_points = t.quantization_->zero_points.to_owned();
  }
  return t;
}

bool Tensor::operator==(const Tensor& o) const {
  auto same = [](const Bytes& a, const Bytes& b) {
    return a.size() == b.size() &&
           (a.size() == 0 || std::memcmp(a.data(), b.data(), a.size()) == 0);
  };
  return dtype_ == o.dtype_ && shape_ == o.shape_ && layout_ == o.layout_ && nnz_ == o.nnz_ &&
         same(values_, o.values_) && same(offsets_, o.offsets_) && same(indices_, o.indices_) &&
         quantization_ == o.quantization_;
}

void Tensor::check_view(ViewType type, std::size_t alignment) const {
  // Spelled as the table at Tensor::as spells them, in ViewType order.
  static constexpr std::string_view kNames[] = {
      "std::int8_t",  "std::int16_t",  "std::int32_t",        "std::int64_t",
      "std::uint8_t", "std::uint16_t", "std::uint32_t",       "std::uint64_t",
      "float",        "double",        "std::complex<float>", "std::complex<double>"};
  static_assert(std::size(kNames) == static_cast<std::size_t>(ViewType::c128) + 1);
  const auto view_type_name = [](ViewType t) { return kNames[static_cast<std::size_t>(t)]; };
  const std::string asked = "as<" + std::string(view_type_name(type)) + ">() of ";
  if (layout_ == Layout::quantized) {
    const QuantStorage storage = quantization_->storage;
    const ViewType stored = storage == QuantStorage::uint8 ? ViewType::u8 : ViewType::i8;
    if (type != stored)
      fail_invalid(asked + "a quantized " + std::string(dtype_name(dtype_)) + " tensor (" +
                   std::string(quant_storage_name(storage)) + " storage): use as<" +
                   std::string(view_type_name(stored)) + ">() for the stored integers or " +
                   "dequantize() for the values");
  } else {
    if (dtype_ == DType::utf8)
      fail_invalid(asked + "a string tensor: strings are not viewable, use string_at()");
    // The dtype's element type, and what its elements mean when not plain.
    const auto [want, note] = [this]() -> std::pair<ViewType, std::string_view> {
      switch (dtype_) {
        case DType::int8:
          return {ViewType::i8, ""};
        case DType::int16:
          return {ViewType::i16, ""};
        case DType::int32:
          return {ViewType::i32, ""};
        case DType::int64:
          return {ViewType::i64, ""};
        case DType::uint8:
          return {ViewType::u8, ""};
        case DType::uint16:
          return {ViewType::u16, ""};
        case DType::uint32:
          return {ViewType::u32, ""};
        case DType::uint64:
          return {ViewType::u64, ""};
        case DType::float32:
          return {ViewType::f32, ""};
        case DType::float64:
          return {ViewType::f64, ""};
        case DType::complex64:
          return {ViewType::c64, ""};
        case DType::complex128:
          return {ViewType::c128, ""};
        case DType::bool_:
          return {ViewType::u8, " (one byte each, 0 is false)"};
        case DType::float16:
        case DType::bfloat16:
          return {ViewType::u16, " (the bits)"};
        case DType::float8_e4m3fn:
        case DType::float8_e5m2:
        case DType::float8_e8m0fnu:
          return {ViewType::u8, " (the bits)"};
        case DType::float4_e2m1fn_x2:
          return {ViewType::u8, " (one byte per pair of FP4 values, the first in the low nibble)"};
        case DType::utf8:
          break;
      }
      fail_invalid("unsupported dtype");
    }();
    if (type != want)
      fail_invalid(asked + dtype_with_article(dtype_) + " tensor: use as<" +
                   std::string(view_type_name(want)) + ">()" + std::string(note));
  }
  if (reinterpret_cast<std::uintptr_t>(values_.data()) % alignment != 0)
    fail_invalid("tensor data is not aligned for the requested element type");
}

}  // namespace modelzip
