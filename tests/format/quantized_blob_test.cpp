// Quantized tensor blobs (FORMAT.md section 6.1): writer layout and zero-copy
// round trips, every header rule against hand-built headers, data rules on
// decode, and the committed golden blobs (tests/golden/format/quant-*.fb)
// checked byte for byte and decoded by flatc, a third-party reader.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "../zip/expect_error.hpp"
#include "blob_builder.hpp"
#include "format/tensor_blob.hpp"
#include "modelzip/error.hpp"
#include "modelzip/quantize.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::format;
using namespace modelzip::testing;

namespace {

Tensor decode(const std::string& entry) {
  return decode_tensor_blob(Bytes::copy_of(entry), {});
}

BlobHeader header_of(const std::string& entry) {
  return read_blob_header(span_of(entry), entry.size(), {});
}

template <class T>
Bytes bytes_from(std::vector<T> v) {
  std::vector<std::byte> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());  // memcpy(nullptr, ...) is UB
  return Bytes::take(std::move(b));
}

std::vector<float> floats(const Tensor& t) {
  Tensor f = t.dequantize(DType::float32);
  return {f.as<float>().begin(), f.as<float>().end()};
}

std::string bytes_str(std::vector<int> v) {
  std::string s;
  for (int x : v) s += static_cast<char>(x);
  return s;
}

}  // namespace

TEST_CASE("Quantized blobs round trip for every scheme and original type, zero-copy") {
  const Shape shape{5, 37};  // rows of 37: one block of 32 and a partial one of 5
  for (DType dt : {DType::float32, DType::float16, DType::bfloat16}) {
    std::vector<std::byte> src(5 * 37 * dtype_size(dt));
    for (std::size_t i = 0; i < src.size(); ++i)
      src[i] = static_cast<std::byte>((i * 37 + 11) % 251 % 64);  // small finite values
    Tensor t = Tensor::dense(dt, shape, Bytes::take(std::move(src)));
    for (auto scheme : {QuantizeRecipe::int8_per_tensor, QuantizeRecipe::int8_per_channel,
                        QuantizeRecipe::int8_block32, QuantizeRecipe::int4_block32}) {
      INFO(dtype_name(dt), " ", quantize_recipe_name(scheme));
      Tensor q = quantize(t, scheme);
      EncodedBlob enc = encode_tensor_blob(q);
      std::string bytes = concat(enc);
      CHECK(bytes.size() == enc.size);
      BlobHeader h = header_of(bytes);
      CHECK(h.layout == Layout::quantized);
      REQUIRE(h.quantization);
      CHECK(h.quantization->scheme == q.quantization()->scheme);
      // Writers: values first, at the first multiple of 64 after the header;
      // scales and zero points after it, each 64-aligned.
      CHECK(h.values.offset == (h.header_end + 63) / 64 * 64);
      CHECK(h.values.length == quant_values_bytes(q.quantization()->storage, 5 * 37));
      if (h.scales.length)
        CHECK(h.scales.offset == (h.values.offset + h.values.length + 63) / 64 * 64);
      if (h.zero_points.length)
        CHECK(h.zero_points.offset == (h.scales.offset + h.scales.length + 63) / 64 * 64);
      // Decode from an aligned buffer: the integers are a view into it.
      std::vector<std::uint64_t> aligned((bytes.size() + 7) / 8);
      std::memcpy(aligned.data(), bytes.data(), bytes.size());
      Bytes entry_bytes = Bytes::borrow(
          std::span(reinterpret_cast<const std::byte*>(aligned.data()), bytes.size()), nullptr);
      Tensor back = decode_tensor_blob(entry_bytes, {});
      CHECK(back == q);
      CHECK(back.values().data() == entry_bytes.data() + h.values.offset);
      CHECK(back.dequantize() == q.dequantize());
    }
  }
}

TEST_CASE("Quantized header rules (FORMAT.md section 6.1)") {
  SUBCASE("layout and quantization table go together") {
    QBlob b = qblob(5, {2}, per_tensor(1, 0), "\x01\x02");
    b.spec.quantization.reset();
    CHECK_ERROR(header_of(entry(b)), ErrorCode::corrupt,
                "QUANTIZED layout needs a quantization table");
    QBlob d = qblob(5, {2}, per_tensor(1, 0), std::string(8, '\0'));
    d.spec.layout = 0;
    CHECK_ERROR(header_of(entry(d)), ErrorCode::corrupt,
                "a quantization table is allowed only with the QUANTIZED layout");
  }
  SUBCASE("unknown scheme, storage, layout are unsupported") {
    QuantSpec q = per_tensor(1, 0);
    q.scheme = 3;
    CHECK_ERROR(header_of(entry(qblob(5, {2}, q, "\x01\x02"))), ErrorCode::unsupported,
                "quantization.scheme 3 is not supported");
    q = per_tensor(1, 0);
    q.storage = 3;
    CHECK_ERROR(header_of(entry(qblob(5, {2}, q, "\x01\x02"))), ErrorCode::unsupported,
                "quantization.storage 3 is not supported");
    QBlob b = qblob(5, {2}, per_tensor(1, 0), "\x01\x02");
    b.spec.layout = 3;
    CHECK_ERROR(header_of(entry(b)), ErrorCode::unsupported, "unknown layout 3");
  }
  SUBCASE("original type must be floating point") {
    CHECK_ERROR(header_of(entry(qblob(7, {2}, per_tensor(1, 0), "\x01\x02"))), ErrorCode::corrupt,
                "stands for float16, bfloat16, float32 or float64 values, not int8");
    // Not the 8-bit floats either (section 6.1): int8 codes would not be smaller.
    CHECK_ERROR(header_of(entry(qblob(18, {2}, per_tensor(1, 0), "\x01\x02"))), ErrorCode::corrupt,
                "float32 or float64 values, not float8_e4m3fn");
    CHECK_ERROR(header_of(entry(qblob(19, {2}, per_tensor(1, 0), "\x01\x02"))), ErrorCode::corrupt,
                "float32 or float64 values, not float8_e5m2");
    // Nor complex values: the schemes map real values to integers.
    CHECK_ERROR(header_of(entry(qblob(20, {2}, per_tensor(1, 0), "\x01\x02"))), ErrorCode::corrupt,
                "float32 or float64 values, not complex64");
    CHECK_ERROR(header_of(entry(qblob(21, {2}, per_tensor(1, 0), "\x01\x02"))), ErrorCode::corrupt,
                "float32 or float64 values, not complex128");
  }
  SUBCASE("per-tensor scale and zero point") {
    CHECK_ERROR(header_of(entry(qblob(5, {2}, per_tensor(0, 0), "\x01\x02"))), ErrorCode::corrupt,
                "tensor blob: quantization.scale 0 is not positive and finite");
    CHECK_ERROR(header_of(entry(qblob(5, {2}, per_tensor(-0.5, 0), "\x01\x02"))),
                ErrorCode::corrupt, "quantization.scale -0.5");
    CHECK_ERROR(header_of(entry(qblob(5, {2}, per_tensor(INFINITY, 0), "\x01\x02"))),
                ErrorCode::corrupt, "quantization.scale inf");
    CHECK_ERROR(header_of(entry(qblob(5, {2}, per_tensor(NAN, 0), "\x01\x02"))), ErrorCode::corrupt,
                "quantization.scale nan");
    CHECK_ERROR(header_of(entry(qblob(5, {2}, per_tensor(1, -129), "\x01\x02"))),
                ErrorCode::corrupt, "quantization.zero_point -129 is outside the int8 range");
    CHECK_ERROR(header_of(entry(qblob(5, {2}, per_tensor(1, 256, 1), "\x01\x02"))),
                ErrorCode::corrupt, "quantization.zero_point 256 is outside the uint8 range");
  }
  SUBCASE("per-axis: axis, counts, scale type") {
    const std::string sc = le_bytes(std::vector<double>{1, 2});
    const std::string zp = le_bytes(std::vector<std::int64_t>{0, 0});
    CHECK(header_of(entry(qblob(5, {2, 3}, per_axis(0), std::string(6, '\1'), sc, zp)))
              .scales.length == 16);
    CHECK_ERROR(header_of(entry(qblob(5, {2, 3}, per_axis(2), std::string(6, '\1'), sc, zp))),
                ErrorCode::corrupt, "quantization.axis 2 is outside a tensor of rank 2");
    CHECK_ERROR(header_of(entry(qblob(5, {2, 3}, per_axis(-1), std::string(6, '\1'), sc, zp))),
                ErrorCode::corrupt, "quantization.axis -1 is outside");
    CHECK_ERROR(header_of(entry(qblob(5, {2, 3}, per_axis(1), std::string(6, '\1'), sc, zp))),
                ErrorCode::corrupt,
                "quantization.scales segment holds 16 bytes, the header implies 24");
    CHECK_ERROR(
        header_of(entry(qblob(5, {2, 3}, per_axis(0), std::string(6, '\1'), sc, "12345678"))),
        ErrorCode::corrupt,
        "quantization.zero_points segment holds 8 bytes, the header implies 16");
    QuantSpec f = per_axis(0);
    f.scale_type = 5;
    CHECK_ERROR(header_of(entry(qblob(5, {2, 3}, f, std::string(6, '\1'), sc, zp))),
                ErrorCode::corrupt, "scale_type must be float64 for affine-per-axis, not float32");
    f.scale_type = 15;  // QINT8: not a type at all
    CHECK_ERROR(header_of(entry(qblob(5, {2, 3}, f, std::string(6, '\1'), sc, zp))),
                ErrorCode::corrupt, "quantization.scale_type 15 is not a supported data type");
  }
  SUBCASE("block: block size, counts, storage, packed int4 length") {
    CHECK_ERROR(header_of(entry(qblob(5, {4}, blocks(0, 0), "\1\1\1\1", "\0\0\x80\x3f"))),
                ErrorCode::corrupt, "quantization.block_size is 0");
    CHECK_ERROR(
        header_of(entry(qblob(5, {4}, blocks(0, 3), "\1\1\1\1", std::string("\0\0\x80\x3f", 4)))),
        ErrorCode::corrupt, "quantization.scales segment holds 4 bytes, the header implies 8");
    CHECK_ERROR(
        header_of(entry(qblob(5, {3}, blocks(0, 4, 2), "\1\1\1", std::string("\0\0\x80\x3f", 4)))),
        ErrorCode::corrupt, "values segment holds 3 bytes, the header implies 2");
    CHECK_ERROR(header_of(entry(
                    qblob(5, {4}, blocks(0, 4, 1), "\1\1\1\1", std::string("\0\0\x80\x3f", 4)))),
                ErrorCode::corrupt, "storage uint8 is not allowed with block-symmetric");
    CHECK_ERROR(header_of(entry(qblob(5, {2}, per_tensor(1, 0, 2), "\1"))), ErrorCode::corrupt,
                "storage int4 is not allowed with affine-per-tensor");
    CHECK_ERROR(header_of(entry(qblob(5, {4}, blocks(0, 4, 0, 6), "\1\1\1\1",
                                      le_bytes(std::vector<double>{1})))),
                ErrorCode::corrupt, "scale_type must be float16 or float32 for block-symmetric");
    QBlob zp = qblob(5, {4}, blocks(0, 4), "\1\1\1\1", std::string("\0\0\x80\x3f", 4), "12345678");
    CHECK_ERROR(header_of(entry(zp)), ErrorCode::corrupt,
                "quantization.zero_points segment holds 8 bytes, the header implies 0");
  }
  SUBCASE("scales segment overlapping the values, or outside the entry") {
    QBlob b = qblob(5, {2, 3}, per_axis(0), std::string(6, '\1'),
                    le_bytes(std::vector<double>{1, 2}), le_bytes(std::vector<std::int64_t>{0, 0}));
    b.spec.quantization->scales->first = b.spec.values->first;
    CHECK_ERROR(header_of(entry(b)), ErrorCode::corrupt, "overlap");
    b = qblob(5, {2, 3}, per_axis(0), std::string(6, '\1'), le_bytes(std::vector<double>{1, 2}),
              le_bytes(std::vector<std::int64_t>{0, 0}));
    b.spec.quantization->zero_points->first += 4096;
    CHECK_ERROR(header_of(entry(b)), ErrorCode::corrupt, "quantization.zero_points segment");
  }
}

TEST_CASE("Quantized data rules are checked on decode") {
  const std::string values(6, '\1');
  auto per_axis_blob = [&](std::vector<double> scales, std::vector<std::int64_t> zps, int storage) {
    QuantSpec q = per_axis(0);
    q.storage = storage;
    return entry(qblob(5, {2, 3}, q, values, le_bytes(scales), le_bytes(zps)));
  };
  CHECK(floats(decode(per_axis_blob({1, 2}, {0, 1}, 0))) == std::vector<float>{1, 1, 1, 0, 0, 0});
  CHECK_ERROR(decode(per_axis_blob({1, 0}, {0, 0}, 0)), ErrorCode::corrupt,
              "tensor blob: quantization.scales[1] 0 is not positive and finite");
  CHECK_ERROR(decode(per_axis_blob({-1, 1}, {0, 0}, 0)), ErrorCode::corrupt,
              "quantization.scales[0] -1");
  CHECK_ERROR(decode(per_axis_blob({1, NAN}, {0, 0}, 0)), ErrorCode::corrupt,
              "quantization.scales[1] nan");
  CHECK_ERROR(decode(per_axis_blob({1, 1}, {0, 128}, 0)), ErrorCode::corrupt,
              "quantization.zero_points[1] 128 is outside the int8 range [-128, 127]");
  CHECK_ERROR(decode(per_axis_blob({1, 1}, {-1, 0}, 1)), ErrorCode::corrupt,
              "quantization.zero_points[0] -1 is outside the uint8 range [0, 255]");
  // Block scales of float16: 0x0000 (zero), 0x7C00 (inf), 0xBC00 (-1).
  for (int bits : {0x0000, 0x7C00, 0xBC00, 0x7E00}) {
    CHECK_ERROR(decode(entry(
                    qblob(5, {4}, blocks(0, 4, 0, 3), "\1\1\1\1",
                          le_bytes(std::vector<std::uint16_t>{static_cast<std::uint16_t>(bits)})))),
                ErrorCode::corrupt, "quantization.scales[0]");
  }
  // Odd int4 count: the last high nibble must be 0.
  CHECK(floats(decode(entry(qblob(5, {3}, blocks(0, 4, 2, 3), bytes_str({0xC7, 0x01}),
                                  le_bytes(std::vector<std::uint16_t>{0x3C00}))))) ==
        std::vector<float>{7, -4, 1});
  CHECK_ERROR(decode(entry(qblob(5, {3}, blocks(0, 4, 2, 3), bytes_str({0xC7, 0x21}),
                                 le_bytes(std::vector<std::uint16_t>{0x3C00})))),
              ErrorCode::corrupt, "high nibble");
}

TEST_CASE("Big-endian quantized blobs: scales and zero points are swapped, integers are bytes") {
  QuantSpec q = per_axis(1);
  QBlob b = qblob(5, {1, 2}, q, "\x05\xFE", be_bytes(std::vector<double>{0.5, 2.0}),
                  be_bytes(std::vector<std::int64_t>{1, -2}));
  b.spec.byte_order = 1;
  // (5 - 1) * 0.5 = 2, (-2 + 2) * 2 = 0
  CHECK(floats(decode(entry(b))) == std::vector<float>{2, 0});
  QBlob pt = qblob(5, {2}, per_tensor(0.5, -1), "\x01\x03");
  pt.spec.byte_order = 1;  // per-tensor parameters live in the FlatBuffer: nothing to swap
  CHECK(floats(decode(entry(pt))) == std::vector<float>{1, 2});
}
