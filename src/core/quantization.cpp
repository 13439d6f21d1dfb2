#include "modelzip/quantization.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/checked.hpp"
#include "core/fail.hpp"
#include "core/float16.hpp"
#include "core/quantization_rules.hpp"
#include "modelzip/error.hpp"

namespace modelzip {
namespace {

using modelzip::detail::fail_invalid;

std::uint64_t mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail_invalid("quantization: size overflows 64 bits");
  return r;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

std::string_view quant_scheme_name(QuantScheme scheme) noexcept {
  switch (scheme) {
    case QuantScheme::affine_per_tensor:
      return "affine-per-tensor";
    case QuantScheme::affine_per_axis:
      return "affine-per-axis";
    case QuantScheme::block_symmetric:
      return "block-symmetric";
  }
  return "unknown";
}

std::string_view quant_storage_name(QuantStorage storage) noexcept {
  switch (storage) {
    case QuantStorage::int8:
      return "int8";
    case QuantStorage::uint8:
      return "uint8";
    case QuantStorage::int4:
      return "int4";
  }
  return "unknown";
}

unsigned quant_storage_bits(QuantStorage storage) noexcept {
  return storage == QuantStorage::int4 ? 4 : 8;
}

std::int64_t quant_storage_min(QuantStorage storage) noexcept {
  return storage == QuantStorage::int8 ? -128 : storage == QuantStorage::uint8 ? 0 : -8;
}

std::int64_t quant_storage_max(QuantStorage storage) noexcept {
  return storage == QuantStorage::int8 ? 127 : storage == QuantStorage::uint8 ? 255 : 7;
}

std::uint64_t quant_values_bytes(QuantStorage storage, std::uint64_t numel) noexcept {
  return storage == QuantStorage::int4 ? numel / 2 + numel % 2 : numel;
}

double Quantization::scale_at(std::uint64_t i) const {
  if (scheme == QuantScheme::affine_per_tensor) {
    if (i != 0) fail_invalid("quantization: scale index out of range");
    return scale;
  }
  const std::size_t width = dtype_size(scale_dtype);
  if (width == 0 || i >= scales.size() / width)
    fail_invalid("quantization: scale index out of range");
  const std::byte* p = scales.data() + i * width;
  switch (scale_dtype) {
    case DType::float16:
      return detail::half_to_float(detail::load_le<std::uint16_t>(p));
    case DType::float32:
      return detail::load_le<float>(p);
    case DType::float64:
      return detail::load_le<double>(p);
    default:
      fail_invalid("quantization: scales of type " + std::string(dtype_name(scale_dtype)) +
                   " are not supported");
  }
}

std::int64_t Quantization::zero_point_at(std::uint64_t i) const {
  if (scheme == QuantScheme::affine_per_tensor) {
    if (i != 0) fail_invalid("quantization: zero point index out of range");
    return zero_point;
  }
  if (scheme == QuantScheme::block_symmetric) return 0;
  if (i >= zero_points.size() / 8) fail_invalid("quantization: zero point index out of range");
  return detail::load_le<std::int64_t>(zero_points.data() + i * 8);
}

std::uint64_t Quantization::row_length(std::span<const std::int64_t> shape) const {
  if (axis < 0 || static_cast<std::uint64_t>(axis) >= shape.size())
    fail_invalid("quantization.axis " + std::to_string(axis) + " is outside a tensor of rank " +
                 std::to_string(shape.size()));
  std::uint64_t n = 1;
  for (std::size_t d = static_cast<std::size_t>(axis); d < shape.size(); ++d)
    n = mul(n, static_cast<std::uint64_t>(shape[d]));
  return n;
}

std::uint64_t Quantization::scale_count(std::span<const std::int64_t> shape) const {
  switch (scheme) {
    case QuantScheme::affine_per_tensor:
      return 1;
    case QuantScheme::affine_per_axis:
      (void)row_length(shape);  // checks the axis
      return static_cast<std::uint64_t>(shape[static_cast<std::size_t>(axis)]);
    case QuantScheme::block_symmetric: {
      std::uint64_t k = row_length(shape);
      if (block_size == 0) fail_invalid("quantization.block_size is 0; it must be at least 1");
      std::uint64_t rows = 1;
      for (std::size_t d = 0; d < static_cast<std::size_t>(axis); ++d)
        rows = mul(rows, static_cast<std::uint64_t>(shape[d]));
      return mul(rows, k / block_size + (k % block_size != 0));
    }
  }
  fail_invalid("quantization: unknown scheme");
}

double Quantization::element_scale(std::span<const std::int64_t> shape, std::uint64_t index) const {
  switch (scheme) {
    case QuantScheme::affine_per_tensor:
      return scale;
    case QuantScheme::affine_per_axis: {
      std::uint64_t inner = row_length(shape) / static_cast<std::uint64_t>(std::max<std::int64_t>(
                                                    shape[static_cast<std::size_t>(axis)], 1));
      if (inner == 0) fail_invalid("quantization: element index out of range");
      return scale_at((index / inner) %
                      static_cast<std::uint64_t>(shape[static_cast<std::size_t>(axis)]));
    }
    case QuantScheme::block_symmetric: {
      const std::uint64_t k = row_length(shape);
      if (k == 0 || block_size == 0) fail_invalid("quantization: element index out of range");
      const std::uint64_t per_row = k / block_size + (k % block_size != 0);
      return scale_at((index / k) * per_row + (index % k) / block_size);
    }
  }
  fail_invalid("quantization: unknown scheme");
}

bool Quantization::operator==(const Quantization& o) const {
  auto same = [](const Bytes& a, const Bytes& b) {
    return a.size() == b.size() &&
           (a.size() == 0 || std::memcmp(a.data(), b.data(), a.size()) == 0);
  };
  bool per_tensor = scheme == QuantScheme::affine_per_tensor;
  bool per_axis = scheme == QuantScheme::affine_per_axis;
  bool block = scheme == QuantScheme::block_symmetric;
  return scheme == o.scheme && storage == o.storage &&
         (!per_tensor ||
          (std::memcmp(&scale, &o.scale, sizeof scale) == 0 && zero_point == o.zero_point)) &&
         (per_tensor || (axis == o.axis && scale_dtype == o.scale_dtype)) &&
         (!block || block_size == o.block_size) &&
         (!per_axis || same(zero_points, o.zero_points)) && same(scales, o.scales);
}

namespace detail {

QuantLengths check_quantization_header(const Quantization& q, DType original,
                                       std::span<const std::int64_t> shape) {
  if (!quantizable_type(original))
    fail_invalid(
        "a quantized tensor stands for float16, bfloat16, float32 or float64 values, not " +
        std::string(dtype_name(original)));
  std::uint64_t numel = 1;
  for (auto d : shape) {
    if (d < 0) fail_invalid("negative dimension " + std::to_string(d));
    numel = mul(numel, static_cast<std::uint64_t>(d));
  }
  QuantLengths out;
  out.values = quant_values_bytes(q.storage, numel);
  const bool affine = q.scheme != QuantScheme::block_symmetric;
  switch (q.storage) {
    case QuantStorage::int8:
      break;
    case QuantStorage::uint8:
      if (!affine) fail_invalid("quantization.storage uint8 is not allowed with block-symmetric");
      break;
    case QuantStorage::int4:
      if (affine)
        fail_invalid("quantization.storage int4 is not allowed with " +
                     std::string(quant_scheme_name(q.scheme)));
      break;
    default:
      fail_invalid("quantization.storage " + std::to_string(static_cast<int>(q.storage)) +
                   " is unknown");
  }
  switch (q.scheme) {
    case QuantScheme::affine_per_tensor:
      if (!std::isfinite(q.scale) || !(q.scale > 0))
        fail_invalid("quantization.scale " + number(q.scale) + " is not positive and finite");
      if (q.zero_point < quant_storage_min(q.storage) ||
          q.zero_point > quant_storage_max(q.storage))
        fail_invalid("quantization.zero_point " + std::to_string(q.zero_point) +
                     " is outside the " + std::string(quant_storage_name(q.storage)) + " range [" +
                     std::to_string(quant_storage_min(q.storage)) + ", " +
                     std::to_string(quant_storage_max(q.storage)) + "]");
      break;
    case QuantScheme::affine_per_axis: {
      if (q.scale_dtype != DType::float64)
        fail_invalid("quantization.scale_type must be float64 for affine-per-axis, not " +
                     std::string(dtype_name(q.scale_dtype)));
      std::uint64_t n = q.scale_count(shape);
      out.scales = mul(n, 8);
      out.zero_points = mul(n, 8);
      break;
    }
    case QuantScheme::block_symmetric: {
      if (q.scale_dtype != DType::float16 && q.scale_dtype != DType::float32)
        fail_invalid(
            "quantization.scale_type must be float16 or float32 for block-symmetric, not " +
            std::string(dtype_name(q.scale_dtype)));
      out.scales = mul(q.scale_count(shape), dtype_size(q.scale_dtype));
      break;
    }
    default:
      fail_invalid("quantization.scheme " + std::to_string(static_cast<int>(q.scheme)) +
                   " is unknown");
  }
  return out;
}

void check_quantization_data(const Quantization& q, const Bytes& values, std::uint64_t numel) {
  if (q.scheme != QuantScheme::affine_per_tensor) {
    const std::uint64_t n = q.scales.size() / dtype_size(q.scale_dtype);
    for (std::uint64_t i = 0; i < n; ++i) {
      double s = q.scale_at(i);
      if (!std::isfinite(s) || !(s > 0))
        fail_invalid("quantization.scales[" + std::to_string(i) + "] " + number(s) +
                     " is not positive and finite");
    }
    const std::int64_t lo = quant_storage_min(q.storage), hi = quant_storage_max(q.storage);
    for (std::uint64_t i = 0; i < q.zero_points.size() / 8; ++i) {
      std::int64_t z = q.zero_point_at(i);
      if (z < lo || z > hi)
        fail_invalid("quantization.zero_points[" + std::to_string(i) + "] " + std::to_string(z) +
                     " is outside the " + std::string(quant_storage_name(q.storage)) + " range [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
  }
  if (q.storage == QuantStorage::int4 && numel % 2 == 1 && values.size() > 0 &&
      (static_cast<std::uint8_t>(values.data()[values.size() - 1]) >> 4) != 0)
    fail_invalid(
        "values: the unused high nibble of the last byte of an odd-length int4 tensor is not 0");
}

}  // namespace detail
}  // namespace modelzip
