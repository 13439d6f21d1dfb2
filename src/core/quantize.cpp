// quantize(): a floating-point tensor to one of the four schemes of
// modelzip/quantize.hpp. Each element dequantizes within scale / 2 of its
// original value: affine ranges include 0 and span exactly 255 steps;
// block scales are rounded up, so |x / scale| <= qmax and no value clamps.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/checked.hpp"
#include "core/fail.hpp"
#include "core/float16.hpp"
#include "core/quantization_rules.hpp"
#include "modelzip/error.hpp"
#include "modelzip/quantize.hpp"

namespace modelzip {
namespace {

using modelzip::detail::fail_invalid;

// Calls f(load) with load(i) -> double, the i-th element of a dense
// floating-point tensor.
template <class F>
void with_loader(const Tensor& t, F&& f) {
  const std::byte* p = t.values().data();
  switch (t.dtype()) {
    case DType::float16:
      return f([p](std::uint64_t i) {
        return static_cast<double>(
            detail::half_to_float(detail::load_le<std::uint16_t>(p + 2 * i)));
      });
    case DType::bfloat16:
      return f([p](std::uint64_t i) {
        return static_cast<double>(
            detail::bfloat16_to_float(detail::load_le<std::uint16_t>(p + 2 * i)));
      });
    case DType::float32:
      return f(
          [p](std::uint64_t i) { return static_cast<double>(detail::load_le<float>(p + 4 * i)); });
    case DType::float64:
      return f([p](std::uint64_t i) { return detail::load_le<double>(p + 8 * i); });
    default:
      fail_invalid(
          "quantize: only float16, bfloat16, float32 and float64 tensors can be quantized, not " +
          std::string(dtype_name(t.dtype())));
  }
}

[[noreturn]] void not_finite(std::uint64_t i, double x) {
  fail_invalid("quantize: element " + std::to_string(i) + " is " +
               (std::isnan(x) ? "NaN" : "infinite") + "; only finite values can be quantized");
}

// C's round (to nearest, halves away from zero) for |v| < 2^62, without a
// libm call: v - trunc(v) is exact in binary floating point.
inline std::int64_t round_half_away(double v) noexcept {
  auto t = static_cast<std::int64_t>(v);
  double frac = v - static_cast<double>(t);
  return t + (frac >= 0.5) - (frac <= -0.5);
}

struct Affine {
  double scale = 1;
  std::int64_t zero_point = 0;
};

// int8 affine parameters for values in [lo, hi] (lo <= 0 <= hi).
Affine affine_for(double lo, double hi) {
  Affine a;
  if (!(hi > lo)) return a;  // all zero
  a.scale = hi / 255 - lo / 255;
  if (!std::isfinite(a.scale))
    fail_invalid("quantize: the value range is too wide for a float64 scale");
  if (!(a.scale > 0)) a.scale = std::numeric_limits<double>::denorm_min();
  a.zero_point = std::clamp<std::int64_t>(
      -128 - static_cast<std::int64_t>(std::round(lo / a.scale)), -128, 127);
  return a;
}

inline std::byte affine_q(double x, const Affine& a) {
  // |x / scale| <= 255 (plus rounding) for values in the range the scale was made for.
  auto q = round_half_away(x / a.scale) + a.zero_point;
  return static_cast<std::byte>(static_cast<std::int8_t>(std::clamp<std::int64_t>(q, -128, 127)));
}

void store_f64(std::vector<std::byte>& out, std::uint64_t i, double v) {
  detail::store_le<double>(out.data() + i * 8, v);
}

Tensor per_tensor(const Tensor& t) {
  const std::uint64_t n = t.numel();
  std::vector<std::byte> q(n);
  Quantization qz;
  qz.scheme = QuantScheme::affine_per_tensor;
  qz.storage = QuantStorage::int8;
  with_loader(t, [&](auto load) {
    double lo = 0, hi = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      double x = load(i);
      if (!std::isfinite(x)) not_finite(i, x);
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    Affine a = affine_for(lo, hi);
    qz.scale = a.scale;
    qz.zero_point = a.zero_point;
    for (std::uint64_t i = 0; i < n; ++i) q[i] = affine_q(load(i), a);
  });
  return Tensor::quantized(t.dtype(), t.shape(), std::move(qz), Bytes::take(std::move(q)));
}

Tensor per_channel(const Tensor& t) {
  if (t.rank() == 0)
    fail_invalid("quantize: int8-per-channel needs a tensor of rank >= 1 (channels on axis 0)");
  const std::uint64_t n = t.numel();
  const auto channels = static_cast<std::uint64_t>(t.shape()[0]);
  const std::uint64_t inner = channels == 0 ? 0 : n / channels;
  std::vector<std::byte> q(n), scales(channels * 8), zps(channels * 8);
  with_loader(t, [&](auto load) {
    for (std::uint64_t c = 0; c < channels; ++c) {
      const std::uint64_t begin = c * inner, end = begin + inner;
      double lo = 0, hi = 0;
      for (std::uint64_t i = begin; i < end; ++i) {
        double x = load(i);
        if (!std::isfinite(x)) not_finite(i, x);
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
      Affine a = affine_for(lo, hi);
      store_f64(scales, c, a.scale);
      detail::store_le<std::int64_t>(zps.data() + c * 8, a.zero_point);
      for (std::uint64_t i = begin; i < end; ++i) q[i] = affine_q(load(i), a);
    }
  });
  Quantization qz;
  qz.scheme = QuantScheme::affine_per_axis;
  qz.storage = QuantStorage::int8;
  qz.axis = 0;
  qz.scale_dtype = DType::float64;
  qz.scales = Bytes::take(std::move(scales));
  qz.zero_points = Bytes::take(std::move(zps));
  return Tensor::quantized(t.dtype(), t.shape(), std::move(qz), Bytes::take(std::move(q)));
}

// The smallest float16 >= s (s > 0), or nullopt when that is not a normal
// finite float16.
std::optional<std::uint16_t> half_at_least(double s) {
  std::uint16_t h = detail::double_to_half(s);
  if (detail::half_to_float(h) < s) ++h;
  if (h < 0x0400 || h >= 0x7C00) return std::nullopt;
  return h;
}

float float_at_least(double s) {
  auto f = static_cast<float>(s);
  if (f < s) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  if (!(f > 0)) f = std::numeric_limits<float>::denorm_min();
  if (!std::isfinite(f))
    fail_invalid("quantize: a block's values are too large for a float32 scale");
  return f;
}

Tensor block(const Tensor& t, QuantStorage storage, std::uint64_t block_size) {
  if (t.rank() == 0) fail_invalid("quantize: block schemes need a tensor of rank >= 1");
  Quantization qz;
  qz.scheme = QuantScheme::block_symmetric;
  qz.storage = storage;
  qz.axis = t.rank() >= 2 ? 1 : 0;
  qz.block_size = block_size;
  const std::uint64_t n = t.numel();
  const std::uint64_t k = qz.row_length(t.shape());
  const std::uint64_t per_row = k / block_size + (k % block_size != 0);
  const std::uint64_t rows = k == 0 ? 0 : n / k;
  const double qmax = static_cast<double>(quant_storage_max(storage));
  std::vector<double> need(rows * per_row);  // max|x| / qmax per block
  std::vector<std::byte> q(quant_values_bytes(storage, n));
  with_loader(t, [&](auto load) {
    bool half_ok = true;
    std::uint64_t i = 0;
    for (std::uint64_t r = 0; r < rows; ++r)
      for (std::uint64_t b = 0; b < per_row; ++b) {
        double amax = 0;
        for (std::uint64_t j = b * block_size, end = std::min(k, j + block_size); j < end;
             ++j, ++i) {
          double x = load(i);
          if (!std::isfinite(x)) not_finite(i, x);
          amax = std::max(amax, std::fabs(x));
        }
        double s = amax > 0 ? amax / qmax : 1.0;
        need[r * per_row + b] = s;
        if (half_ok && !half_at_least(s)) half_ok = false;
      }
    qz.scale_dtype = half_ok ? DType::float16 : DType::float32;
    const std::size_t width = dtype_size(qz.scale_dtype);
    std::vector<std::byte> scales(need.size() * width);
    i = 0;
    for (std::uint64_t r = 0; r < rows; ++r)
      for (std::uint64_t b = 0; b < per_row; ++b) {
        const std::uint64_t s_index = r * per_row + b;
        double scale;
        if (half_ok) {
          std::uint16_t h = *half_at_least(need[s_index]);
          detail::store_le<std::uint16_t>(scales.data() + s_index * 2, h);
          scale = detail::half_to_float(h);
        } else {
          float f = float_at_least(need[s_index]);
          detail::store_le<float>(scales.data() + s_index * 4, f);
          scale = f;
        }
        for (std::uint64_t j = b * block_size, end = std::min(k, j + block_size); j < end;
             ++j, ++i) {
          const auto m = static_cast<std::int64_t>(qmax);
          auto v = static_cast<std::int32_t>(
              std::clamp<std::int64_t>(round_half_away(load(i) / scale), -m, m));
          if (storage == QuantStorage::int8) {
            q[i] = static_cast<std::byte>(static_cast<std::int8_t>(v));
          } else {
            auto nibble = static_cast<std::uint8_t>(v & 0x0F);
            q[i / 2] |= static_cast<std::byte>(i % 2 == 0 ? nibble : nibble << 4);
          }
        }
      }
    qz.scales = Bytes::take(std::move(scales));
  });
  return Tensor::quantized(t.dtype(), t.shape(), std::move(qz), Bytes::take(std::move(q)));
}

}  // namespace

std::string_view quantize_recipe_name(QuantizeRecipe scheme) noexcept {
  switch (scheme) {
    case QuantizeRecipe::int8_per_tensor:
      return "int8-per-tensor";
    case QuantizeRecipe::int8_per_channel:
      return "int8-per-channel";
    case QuantizeRecipe::int8_block32:
      return "int8-block32";
    case QuantizeRecipe::int4_block32:
      return "int4-block32";
  }
  return "unknown";
}

std::optional<QuantizeRecipe> quantize_recipe_from_name(std::string_view name) noexcept {
  for (auto s : {QuantizeRecipe::int8_per_tensor, QuantizeRecipe::int8_per_channel,
                 QuantizeRecipe::int8_block32, QuantizeRecipe::int4_block32})
    if (quantize_recipe_name(s) == name) return s;
  return std::nullopt;
}

Tensor quantize(const Tensor& tensor, QuantizeRecipe scheme) {
  if (tensor.layout() != Layout::dense)
    fail_invalid("quantize: only dense tensors can be quantized, not " +
                 std::string(layout_name(tensor.layout())) + " ones");
  if (!detail::quantizable_type(tensor.dtype()))
    fail_invalid(
        "quantize: only float16, bfloat16, float32 and float64 tensors can be quantized, not " +
        std::string(dtype_name(tensor.dtype())) +
        (dtype_is_floating(tensor.dtype()) ? " (a quantized tensor cannot stand for 8-bit floats)"
         : dtype_is_complex(tensor.dtype())
             ? " (complex tensors are not quantized: the schemes map real values to integers)"
             : ""));
  switch (scheme) {
    case QuantizeRecipe::int8_per_tensor:
      return per_tensor(tensor);
    case QuantizeRecipe::int8_per_channel:
      return per_channel(tensor);
    case QuantizeRecipe::int8_block32:
      return block(tensor, QuantStorage::int8, 32);
    case QuantizeRecipe::int4_block32:
      return block(tensor, QuantStorage::int4, 32);
  }
  fail_invalid("quantize: unknown scheme");
}

}  // namespace modelzip
