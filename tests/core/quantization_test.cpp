// Quantized tensors: validation of Tensor::quantized, dequantize() against
// hand-computed values, and quantize() within its error bound for every
// scheme and original type (the bound is half a quantization step, the
// scale of the element, plus the rounding of the output type).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/float16.hpp"
#include "modelzip/error.hpp"
#include "modelzip/quantize.hpp"
#include "modelzip/tensor.hpp"

using namespace modelzip;

namespace {

template <class T>
Bytes bytes_from(std::vector<T> v) {
  std::vector<std::byte> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());  // memcpy(nullptr, ...) is UB
  return Bytes::take(std::move(b));
}

Bytes raw(std::vector<int> v) {
  std::vector<std::byte> b;
  for (int x : v) b.push_back(static_cast<std::byte>(x));
  return Bytes::take(std::move(b));
}

std::vector<float> floats(const Tensor& t) {
  Tensor f = t.dequantize(DType::float32);
  return {f.as<float>().begin(), f.as<float>().end()};
}

Quantization per_tensor(double scale, std::int64_t zp, QuantStorage s = QuantStorage::int8) {
  Quantization q;
  q.scale = scale;
  q.zero_point = zp;
  q.storage = s;
  return q;
}

Quantization per_axis(std::int64_t axis, std::vector<double> scales, std::vector<std::int64_t> zps,
                      QuantStorage s = QuantStorage::int8) {
  Quantization q;
  q.scheme = QuantScheme::affine_per_axis;
  q.storage = s;
  q.axis = axis;
  q.scale_dtype = DType::float64;
  q.scales = bytes_from(scales);
  q.zero_points = bytes_from(zps);
  return q;
}

Quantization block(std::int64_t axis, std::uint64_t size, std::vector<float> scales,
                   QuantStorage s = QuantStorage::int8) {
  Quantization q;
  q.scheme = QuantScheme::block_symmetric;
  q.storage = s;
  q.axis = axis;
  q.block_size = size;
  q.scale_dtype = DType::float32;
  q.scales = bytes_from(scales);
  return q;
}

void check_rejected(DType original, Shape shape, Quantization q, Bytes values,
                    const std::string& message) {
  INFO(message);
  try {
    (void)Tensor::quantized(original, shape, q, values);
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    CHECK(std::string(e.what()).find(message) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("Affine per-tensor: hand-computed dequantization, int8 and uint8") {
  Tensor t = Tensor::quantized(DType::float32, {2, 2}, per_tensor(0.5, 3), raw({0, 3, 0xFF, 0x80}));
  CHECK(t.layout() == Layout::quantized);
  CHECK(t.dtype() == DType::float32);
  CHECK(t.numel() == 4);
  // int8: 0, 3, -1, -128 -> (q - 3) * 0.5
  CHECK(floats(t) == std::vector<float>{-1.5f, 0.0f, -2.0f, -65.5f});
  CHECK(t.as<std::int8_t>()[3] == -128);  // zero-copy view of the integers
  CHECK_THROWS_AS(t.as<float>(), Error);

  Tensor u = Tensor::quantized(DType::float32, {4}, per_tensor(0.25, 128, QuantStorage::uint8),
                               raw({0, 128, 0xFF, 0x80}));
  CHECK(floats(u) == std::vector<float>{-32.0f, 0.0f, 31.75f, 0.0f});
  CHECK(u.nbytes() == 4);
}

TEST_CASE("Affine per-axis: scales and zero points follow the axis") {
  // shape [2, 3], axis 1: channel = column.
  Tensor t = Tensor::quantized(DType::float32, {2, 3}, per_axis(1, {1.0, 0.5, 2.0}, {0, 2, -1}),
                               raw({1, 2, 3, 4, 5, 6}));
  CHECK(floats(t) == std::vector<float>{1.0f, 0.0f, 8.0f, 4.0f, 1.5f, 14.0f});
  // axis 0: channel = row.
  Tensor r = Tensor::quantized(DType::float32, {2, 3}, per_axis(0, {1.0, 0.5}, {0, 2}),
                               raw({1, 2, 3, 4, 5, 6}));
  CHECK(floats(r) == std::vector<float>{1.0f, 2.0f, 3.0f, 1.0f, 1.5f, 2.0f});
  CHECK(t.nbytes() == 6 + 3 * 8 + 3 * 8);
}

TEST_CASE("Block symmetric: partial last block, rows from the axis, packed int4 nibbles") {
  // shape [2, 5], axis 1, blocks of 2: per row blocks {0,1} {2,3} {4} -> 3 scales per row.
  Tensor t = Tensor::quantized(DType::float32, {2, 5}, block(1, 2, {1, 2, 4, 0.5f, 0.25f, 8}),
                               raw({1, -1 & 0xFF, 1, 2, 3, 4, 4, 8, 8, 1}));
  CHECK(floats(t) == std::vector<float>{1, -1, 2, 4, 12, 2, 2, 2, 2, 8});
  // axis 0 of [2, 3]: one row of 6 elements, blocks of 4 -> {0..3} {4, 5}.
  Tensor a =
      Tensor::quantized(DType::float32, {2, 3}, block(0, 4, {1, 3}), raw({1, 2, 3, 4, 5, 6}));
  CHECK(floats(a) == std::vector<float>{1, 2, 3, 4, 15, 18});
  // int4: element 2k in the low nibble of byte k; 3 elements -> 2 bytes.
  // 7 -> 0x7, -4 -> 0xC, 1 -> 0x1: bytes 0xC7, 0x01.
  Tensor n = Tensor::quantized(DType::float32, {3}, block(0, 32, {0.5f}, QuantStorage::int4),
                               raw({0xC7, 0x01}));
  CHECK(floats(n) == std::vector<float>{3.5f, -2.0f, 0.5f});
  CHECK(quant_value_at(QuantStorage::int4, n.values().data(), 1) == -4);
  // Float16 scales.
  Quantization h = block(0, 2, {});
  h.scale_dtype = DType::float16;
  h.scales = bytes_from<std::uint16_t>({0x3800, 0x4000});  // 0.5, 2.0
  Tensor f = Tensor::quantized(DType::float32, {4}, h, raw({2, 4, 3, -2 & 0xFF}));
  CHECK(floats(f) == std::vector<float>{1, 2, 6, -4});
}

TEST_CASE("Dequantize rounds once to the original type") {
  // (1 - 0) * (1 + 2^-11): not a float16; nearest (ties to even) is 1.0.
  Tensor t =
      Tensor::quantized(DType::float16, {1}, per_tensor(1.0 + std::ldexp(1.0, -11), 0), raw({1}));
  Tensor d = t.dequantize();
  CHECK(d.dtype() == DType::float16);
  CHECK(d.as<std::uint16_t>()[0] == 0x3C00);
  // 3 * (1 + 2^-10 + 2^-12) = 3.0036...: float16 step at 3 is 2^-9; nearest is 3 + 2^-9 * 2.
  Tensor u =
      Tensor::quantized(DType::bfloat16, {1}, per_tensor(1.0 + std::ldexp(1.0, -8), 0), raw({3}));
  // 3.01171875 in bfloat16 (step 2^-6 at 3): 3 + 0.75 * 2^-6 -> rounds to 3 + 2^-6 = 0x4041.
  CHECK(u.dequantize().as<std::uint16_t>()[0] == 0x4041);
  CHECK(u.dequantize(DType::float64).as<double>()[0] == 3 * (1.0 + std::ldexp(1.0, -8)));
  // Not quantized: returned as is; no other conversion.
  Tensor plain = Tensor::dense(DType::float32, {1}, bytes_from<float>({2}));
  CHECK(plain.dequantize() == plain);
  CHECK_THROWS_AS(plain.dequantize(DType::float16), Error);
  CHECK_THROWS_AS(t.dequantize(DType::int32), Error);
  CHECK_THROWS_WITH_AS(t.dequantize(DType::float8_e4m3fn),
                       "dequantize: the output type must be float16, bfloat16, float32 or "
                       "float64, not float8_e4m3fn",
                       Error);
  // quantize() refuses 8-bit floats with the reason.
  Tensor fp8 = Tensor::dense(DType::float8_e5m2, {2}, raw({0x3C, 0xC0}));
  for (QuantizeRecipe s : {QuantizeRecipe::int8_per_tensor, QuantizeRecipe::int4_block32})
    CHECK_THROWS_WITH_AS(quantize(fp8, s),
                         "quantize: only float16, bfloat16, float32 and float64 tensors can be "
                         "quantized, not float8_e5m2 (a quantized tensor cannot stand for 8-bit "
                         "floats)",
                         Error);
  Tensor c128 = Tensor::dense(DType::complex128, {1}, Bytes::take(std::vector<std::byte>(16)));
  CHECK_THROWS_WITH_AS(quantize(c128, QuantizeRecipe::int8_per_channel),
                       "quantize: only float16, bfloat16, float32 and float64 tensors can be "
                       "quantized, not complex128 (complex tensors are not quantized: the schemes "
                       "map real values to integers)",
                       Error);
  CHECK_THROWS_AS(t.dequantize(DType::complex64), Error);
}

TEST_CASE("Float16 and bfloat16 rounding of doubles") {
  CHECK(detail::double_to_half(65504.0) == 0x7BFF);
  CHECK(detail::double_to_half(65519.99) == 0x7BFF);
  CHECK(detail::double_to_half(65520.0) == 0x7C00);
  CHECK(detail::double_to_half(-0.0) == 0x8000);
  CHECK(detail::double_to_half(std::ldexp(1.0, -24)) == 0x0001);
  CHECK(detail::double_to_half(std::ldexp(1.0, -25)) == 0x0000);        // tie to even
  CHECK(detail::double_to_half(std::ldexp(3.0, -25)) == 0x0002);        // tie to even
  CHECK(detail::double_to_half(std::ldexp(1023.5, -24)) == 0x0400);     // carry into normal
  CHECK(detail::double_to_half(1.0 + std::ldexp(3.0, -11)) == 0x3C02);  // tie to even (up)
  CHECK(detail::double_to_bfloat16(1.0) == 0x3F80);
  CHECK(detail::double_to_bfloat16(std::nan("")) == 0x7FC0);
  for (std::uint32_t h = 0; h < 0x7C00; ++h)  // every finite float16 survives
    REQUIRE(detail::double_to_half(detail::half_to_float(static_cast<std::uint16_t>(h))) == h);
}

TEST_CASE("Invalid quantization parameters name the field") {
  check_rejected(DType::float32, {2}, per_tensor(0, 0), raw({1, 2}), "quantization.scale 0");
  check_rejected(DType::float32, {2}, per_tensor(-1, 0), raw({1, 2}), "quantization.scale -1");
  check_rejected(DType::float32, {2}, per_tensor(NAN, 0), raw({1, 2}), "not positive and finite");
  check_rejected(DType::float32, {2}, per_tensor(INFINITY, 0), raw({1, 2}),
                 "not positive and finite");
  check_rejected(DType::float32, {2}, per_tensor(1, 128), raw({1, 2}),
                 "quantization.zero_point 128 is outside the int8 range [-128, 127]");
  check_rejected(DType::float32, {2}, per_tensor(1, -1, QuantStorage::uint8), raw({1, 2}),
                 "quantization.zero_point -1 is outside the uint8 range [0, 255]");
  check_rejected(DType::float32, {2}, per_tensor(1, 0), raw({1}), "values holds 1 bytes");
  check_rejected(DType::int32, {2}, per_tensor(1, 0), raw({1, 2}), "not int32");
  check_rejected(DType::float8_e4m3fn, {2}, per_tensor(1, 0), raw({1, 2}), "not float8_e4m3fn");
  check_rejected(DType::float8_e5m2, {2}, per_tensor(1, 0), raw({1, 2}), "not float8_e5m2");
  check_rejected(DType::float32, {2}, per_tensor(1, 0, QuantStorage::int4), raw({1}),
                 "storage int4 is not allowed with affine-per-tensor");
  check_rejected(DType::float32, {2, 2}, per_axis(2, {1, 1}, {0, 0}), raw({1, 2, 3, 4}),
                 "quantization.axis 2 is outside a tensor of rank 2");
  check_rejected(DType::float32, {2, 2}, per_axis(-1, {1, 1}, {0, 0}), raw({1, 2, 3, 4}),
                 "quantization.axis -1");
  check_rejected(DType::float32, {2, 2}, per_axis(0, {1, 1, 1}, {0, 0}), raw({1, 2, 3, 4}),
                 "quantization.scales holds 24 bytes, the shape and scheme imply 16");
  check_rejected(DType::float32, {2, 2}, per_axis(0, {1, 1}, {0}), raw({1, 2, 3, 4}),
                 "quantization.zero_points holds 8 bytes");
  check_rejected(DType::float32, {2, 2}, per_axis(0, {1, 0}, {0, 0}), raw({1, 2, 3, 4}),
                 "quantization.scales[1] 0 is not positive and finite");
  check_rejected(DType::float32, {2, 2}, per_axis(0, {1, -2}, {0, 0}), raw({1, 2, 3, 4}),
                 "quantization.scales[1] -2");
  check_rejected(DType::float32, {2, 2}, per_axis(0, {1, INFINITY}, {0, 0}), raw({1, 2, 3, 4}),
                 "quantization.scales[1] inf");
  check_rejected(DType::float32, {2, 2}, per_axis(0, {1, 1}, {0, 300}, QuantStorage::uint8),
                 raw({1, 2, 3, 4}), "quantization.zero_points[1] 300 is outside the uint8 range");
  check_rejected(DType::float32, {4}, block(0, 0, {}), raw({1, 2, 3, 4}),
                 "quantization.block_size is 0");
  check_rejected(DType::float32, {4}, block(0, 3, {1}), raw({1, 2, 3, 4}),
                 "quantization.scales holds 4 bytes, the shape and scheme imply 8");
  check_rejected(DType::float32, {4}, block(0, 4, {std::nanf("")}), raw({1, 2, 3, 4}),
                 "quantization.scales[0] nan");
  check_rejected(DType::float32, {4}, block(0, 4, {1}, QuantStorage::uint8), raw({1, 2, 3, 4}),
                 "storage uint8 is not allowed with block-symmetric");
  check_rejected(DType::float32, {3}, block(0, 4, {1}, QuantStorage::int4), raw({1, 2, 3}),
                 "values holds 3 bytes, the shape and scheme imply 2");
  check_rejected(DType::float32, {3}, block(0, 4, {1}, QuantStorage::int4), raw({0x11, 0x11}),
                 "high nibble");
  check_rejected(DType::float32, {}, block(0, 4, {1}), raw({1}), "quantization.axis 0 is outside");
  Quantization wrong_type = block(0, 4, {1});
  wrong_type.scale_dtype = DType::float64;
  wrong_type.scales = bytes_from<double>({1});
  check_rejected(DType::float32, {4}, wrong_type, raw({1, 2, 3, 4}),
                 "scale_type must be float16 or float32");
}

TEST_CASE("quantize: hand-computed int8 per tensor and int4 block") {
  // lo = -1, hi = 1: scale = 2/255, zero point -128 - round(-127.5) = 0;
  // q = round(x / scale) + 0 = -128 (-127.5 rounds away from 0), 0, 64 (63.75), 127 (127.5 -> 128,
  // clamped).
  Tensor x = Tensor::dense(DType::float32, {4}, bytes_from<float>({-1, 0, 0.5f, 1}));
  Tensor q = quantize(x, QuantizeRecipe::int8_per_tensor);
  REQUIRE(q.quantization());
  CHECK(q.quantization()->scale == 2.0 / 255);
  CHECK(q.quantization()->zero_point == 0);
  CHECK(std::vector<std::int8_t>(q.as<std::int8_t>().begin(), q.as<std::int8_t>().end()) ==
        std::vector<std::int8_t>{-128, 0, 64, 127});
  // max|x| = 7: scale 7/7 = 1 (a float16), q = 7, round(-3.5) = -4, 0, 1.
  Tensor y = Tensor::dense(DType::float32, {4}, bytes_from<float>({7, -3.5f, 0, 1}));
  Tensor b = quantize(y, QuantizeRecipe::int4_block32);
  REQUIRE(b.quantization());
  CHECK(b.quantization()->scale_dtype == DType::float16);
  CHECK(b.quantization()->scale_at(0) == 1.0);
  CHECK(b.values().size() == 2);
  CHECK(std::to_integer<int>(b.values().data()[0]) == 0xC7);
  CHECK(std::to_integer<int>(b.values().data()[1]) == 0x10);
  // Non-finite values and non-float tensors are refused.
  Tensor bad = Tensor::dense(DType::float32, {2}, bytes_from<float>({1, NAN}));
  CHECK_THROWS_WITH_AS(quantize(bad, QuantizeRecipe::int8_block32),
                       doctest::Contains("element 1 is NaN"), Error);
  CHECK_THROWS_AS(quantize(Tensor::dense(DType::int32, {1}, bytes_from<std::int32_t>({1})),
                           QuantizeRecipe::int8_per_tensor),
                  Error);
}

TEST_CASE("quantize: every scheme x original type stays within half a step") {
  std::mt19937 rng(7);
  std::normal_distribution<double> dist(0.0, 0.05);
  const Shape shape{6, 3, 5, 5};  // a conv kernel: rows of 75 = 2 blocks of 32 + one of 11
  const std::uint64_t n = shape_numel(shape);
  std::vector<double> ref(n);
  for (auto& v : ref) v = dist(rng);
  ref[7] = 0;
  for (DType dt : {DType::float32, DType::float16, DType::bfloat16}) {
    // Store the reference values in the original type, keep what it holds.
    std::vector<std::byte> raw_bytes(n * dtype_size(dt));
    std::vector<double> x(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      if (dt == DType::float32) {
        float f = static_cast<float>(ref[i]);
        std::memcpy(raw_bytes.data() + i * 4, &f, 4);
        x[i] = f;
      } else {
        std::uint16_t h = dt == DType::float16 ? detail::double_to_half(ref[i])
                                               : detail::double_to_bfloat16(ref[i]);
        std::memcpy(raw_bytes.data() + i * 2, &h, 2);
        x[i] = dt == DType::float16 ? detail::half_to_float(h) : detail::bfloat16_to_float(h);
      }
    }
    Tensor t = Tensor::dense(dt, shape, Bytes::take(std::move(raw_bytes)));
    for (auto scheme : {QuantizeRecipe::int8_per_tensor, QuantizeRecipe::int8_per_channel,
                        QuantizeRecipe::int8_block32, QuantizeRecipe::int4_block32}) {
      INFO(dtype_name(dt), " ", quantize_recipe_name(scheme));
      Tensor q = quantize(t, scheme);
      const Quantization& qz = *q.quantization();
      CHECK(q.dtype() == dt);
      CHECK(q.shape() == shape);
      // Tensor::quantized validated it; round trip through its own factory.
      CHECK(Tensor::quantized(dt, shape, qz, q.values()) == q);
      Tensor d = q.dequantize(DType::float64);
      CHECK(q.dequantize().dtype() == dt);
      auto dv = d.as<double>();
      double worst = 0;
      for (std::uint64_t i = 0; i < n; ++i) {
        // The element's scale, from the scheme's definition.
        double scale;
        if (qz.scheme == QuantScheme::affine_per_tensor) {
          scale = qz.scale;
        } else if (qz.scheme == QuantScheme::affine_per_axis) {
          scale = qz.scale_at(i / 75);
        } else {
          CHECK(qz.axis == 1);
          CHECK(qz.block_size == 32);
          scale = qz.scale_at((i / 75) * 3 + (i % 75) / 32);
        }
        REQUIRE(qz.element_scale(shape, i) == scale);
        double err = std::fabs(dv[i] - x[i]);
        worst = std::max(worst, err / scale);
        REQUIRE(err <= scale / 2 * (1 + 1e-9));
      }
      CHECK(worst > 0.3);   // the check can fail: errors do reach towards half a step
      CHECK(dv[7] == 0.0);  // zero stays exactly zero in every scheme
    }
  }
}
