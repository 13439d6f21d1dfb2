// Tensor::dequantize: the values a quantized tensor stands for (FORMAT.md
// section 6.1): x computed in float64, rounded once to the output type.
#include <cstring>
#include <vector>

#include "core/checked.hpp"
#include "core/float16.hpp"
#include "modelzip/error.hpp"
#include "modelzip/tensor.hpp"

namespace modelzip {
namespace {

// Writes `x` rounded to `to` at `out` (to: a floating type).
inline void store_as(DType to, std::byte* out, double x) noexcept {
  switch (to) {
    case DType::float16:
      detail::store_le<std::uint16_t>(out, detail::double_to_half(x));
      break;
    case DType::bfloat16:
      detail::store_le<std::uint16_t>(out, detail::double_to_bfloat16(x));
      break;
    case DType::float32:
      detail::store_le<float>(out, static_cast<float>(x));
      break;
    default:
      detail::store_le<double>(out, x);
      break;
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
  if (out_type != DType::float16 && out_type != DType::bfloat16 && out_type != DType::float32 &&
      out_type != DType::float64)
    throw Error(ErrorCode::invalid_argument,
                "dequantize: the output type must be float16, bfloat16, float32 or float64, not " +
                    std::string(dtype_name(out_type)));
  const Quantization& q = *quantization_;
  const std::uint64_t n = numel();
  const std::size_t width = dtype_size(out_type);
  std::vector<std::byte> out(static_cast<std::size_t>(n * width));
  const std::byte* v = values_.data();
  switch (q.scheme) {
    case QuantScheme::affine_per_tensor: {
      const double scale = q.scale;
      const auto zp = static_cast<double>(q.zero_point);
      for (std::uint64_t i = 0; i < n; ++i)
        store_as(out_type, out.data() + i * width, (quant_value_at(q.storage, v, i) - zp) * scale);
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
      std::vector<double> scales(channels), zps(channels);
      for (std::uint64_t c = 0; c < channels; ++c) {
        scales[c] = q.scale_at(c);
        zps[c] = static_cast<double>(q.zero_point_at(c));
      }
      for (std::uint64_t i = 0; i < n; ++i) {
        std::uint64_t c = inner == 0 ? 0 : (i / inner) % channels;
        store_as(out_type, out.data() + i * width,
                 (quant_value_at(q.storage, v, i) - zps[c]) * scales[c]);
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
          const std::uint64_t end = std::min(k, (b + 1) * q.block_size);
          for (std::uint64_t j = b * q.block_size; j < end; ++j, ++i)
            store_as(out_type, out.data() + i * width, quant_value_at(q.storage, v, i) * scale);
        }
      break;
    }
  }
  return Tensor::dense(out_type, shape_, Bytes::take(std::move(out)));
}

}  // namespace modelzip
