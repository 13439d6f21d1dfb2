// Tensor::dequantize: the values a quantized tensor stands for (FORMAT.md
// section 6.1): x computed in float64, rounded once to the output type.
#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/checked.hpp"
#include "core/float16.hpp"
#include "core/quantization_rules.hpp"
#include "modelzip/error.hpp"
#include "modelzip/tensor.hpp"

namespace modelzip {
namespace {

// Writes `x` rounded to `to` at `out` (to: a floating type).
template <DType To>
inline void store_as(std::byte* out, double x) noexcept {
  if constexpr (To == DType::float16)
    detail::store_le<std::uint16_t>(out, detail::double_to_half(x));
  else if constexpr (To == DType::bfloat16)
    detail::store_le<std::uint16_t>(out, detail::double_to_bfloat16(x));
  else if constexpr (To == DType::float32)
    detail::store_le<float>(out, static_cast<float>(x));
  else
    detail::store_le<double>(out, x);
}

// Calls f(storage, to) with both as compile-time constants, so that the
// per-element loops carry no switch.
template <class F>
void dispatch(QuantStorage storage, DType to, F&& f) {
  auto with_to = [&](auto s) {
    switch (to) {
      case DType::float16:
        return f(s, std::integral_constant<DType, DType::float16>{});
      case DType::bfloat16:
        return f(s, std::integral_constant<DType, DType::bfloat16>{});
      case DType::float32:
        return f(s, std::integral_constant<DType, DType::float32>{});
      default:
        return f(s, std::integral_constant<DType, DType::float64>{});
    }
  };
  switch (storage) {
    case QuantStorage::int8:
      return with_to(std::integral_constant<QuantStorage, QuantStorage::int8>{});
    case QuantStorage::uint8:
      return with_to(std::integral_constant<QuantStorage, QuantStorage::uint8>{});
    case QuantStorage::int4:
      return with_to(std::integral_constant<QuantStorage, QuantStorage::int4>{});
  }
}

}  // namespace

Tensor Tensor::dequantize(std::optional<DType> to) const {
  const DType out_type = to.value_or(dtype_);
  if (!quantization_) {
    if (out_type == dtype_) return *this;
    throw Error(ErrorCode::invalid_argument, "dequantize: the tensor is not quantized (it is " +
                                                 std::string(dtype_name(dtype_)) +
                                                 ", not convertible to " +
                                                 std::string(dtype_name(out_type)) + ")");
  }
  if (!detail::quantizable_type(out_type))
    throw Error(ErrorCode::invalid_argument,
                "dequantize: the output type must be float16, bfloat16, float32 or float64, not " +
                    std::string(dtype_name(out_type)));
  const Quantization& q = *quantization_;
  const std::uint64_t n = numel();
  const std::size_t width = dtype_size(out_type);
  // Uninitialized: every byte is written below.
  std::shared_ptr<std::byte[]> out(new std::byte[static_cast<std::size_t>(n * width)]);
  const std::byte* v = values_.data();
  std::byte* o = out.get();
  dispatch(q.storage, out_type, [&](auto storage_c, auto to_c) {
    constexpr QuantStorage S = decltype(storage_c)::value;
    constexpr DType To = decltype(to_c)::value;
    constexpr std::size_t W = To == DType::float32 ? 4 : To == DType::float64 ? 8 : 2;
    switch (q.scheme) {
      case QuantScheme::affine_per_tensor: {
        const double scale = q.scale;
        const auto zp = static_cast<double>(q.zero_point);
        for (std::uint64_t i = 0; i < n; ++i)
          store_as<To>(o + i * W, (quant_value_at(S, v, i) - zp) * scale);
        break;
      }
      case QuantScheme::affine_per_axis: {
        // Elements are [outer][channel][inner]; inner = product of the
        // dimensions after the axis.
        const auto axis = static_cast<std::size_t>(q.axis);
        const auto channels = static_cast<std::uint64_t>(shape_[axis]);
        std::uint64_t inner = 1;
        for (std::size_t d = axis + 1; d < shape_.size(); ++d)
          inner *= static_cast<std::uint64_t>(shape_[d]);
        std::uint64_t i = 0;
        while (i < n && inner > 0)
          for (std::uint64_t c = 0; c < channels; ++c) {
            const double scale = q.scale_at(c);
            const auto zp = static_cast<double>(q.zero_point_at(c));
            for (std::uint64_t end = i + inner; i < end; ++i)
              store_as<To>(o + i * W, (quant_value_at(S, v, i) - zp) * scale);
          }
        break;
      }
      case QuantScheme::block_symmetric: {
        const std::uint64_t k = q.row_length(shape_);
        const std::uint64_t per_row = k / q.block_size + (k % q.block_size != 0);
        std::uint64_t i = 0;
        for (std::uint64_t row = 0; k != 0 && i < n; ++row)
          for (std::uint64_t b = 0; b < per_row; ++b) {
            const double scale = q.scale_at(row * per_row + b);
            const std::uint64_t len = std::min(q.block_size, k - b * q.block_size);
            for (std::uint64_t end = i + len; i < end; ++i)
              store_as<To>(o + i * W, quant_value_at(S, v, i) * scale);
          }
        break;
      }
    }
  });
  const std::byte* begin = out.get();
  return Tensor::dense(out_type, shape_,
                       Bytes::borrow(std::span(begin, static_cast<std::size_t>(n * width)),
                                     std::shared_ptr<const void>(std::move(out))));
}

}  // namespace modelzip
