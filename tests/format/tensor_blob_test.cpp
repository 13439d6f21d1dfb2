// The tensor blob codec: the writer's layout, round trips, and every rule of
// read_blob_header (FORMAT.md section 6) against hand-built headers: lying
// sizes, overlapping and misaligned segments, overflow, unknown enums, broken
// FlatBuffers; big-endian blobs decode to the right values.
#include <doctest/doctest.h>

#include <complex>
#include <cstring>

#include "../zip/expect_error.hpp"
#include "blob_builder.hpp"
#include "format/tensor_blob.hpp"
#include "modelzip/error.hpp"

using namespace modelzip;
using namespace modelzip::format;
using namespace modelzip::testing;

namespace {

Tensor decode(const std::string& entry, const Limits& limits = {}) {
  return decode_tensor_blob(Bytes::copy_of(entry), limits);
}

BlobHeader header_of(const std::string& entry, const Limits& limits = {}) {
  return read_blob_header(span_of(entry), entry.size(), limits);
}

// A dense tensor of dtype `code` and `shape` whose values segment (`bytes`
// long) is where blob_entry puts it.
BlobSpec dense_of(int code, std::vector<std::int64_t> shape, std::uint64_t bytes) {
  BlobSpec s;
  s.dtype = code;
  s.shape = shape;
  s.values = {0, bytes};
  s.values->first = blob_data_offset(s);
  return s;
}

// A float32 tensor of `shape` whose values segment is where blob_entry puts it.
BlobSpec dense_f32(std::vector<std::int64_t> shape, std::uint64_t numel) {
  return dense_of(BlobSpec{}.dtype, shape, numel * 4);
}

// The blob of `s` (whose values are `data`) with a values segment one byte
// short, and its data too: the header is refused as corrupt.
void check_one_byte_short_refused(const BlobSpec& s, const std::string& data) {
  BlobSpec short_values = s;
  short_values.values->second = data.size() - 1;
  CHECK_ERROR(header_of(blob_entry(short_values, data.substr(0, data.size() - 1))),
              ErrorCode::corrupt, "values");
}

}  // namespace

TEST_CASE("Encoding: size prefix, identifier, aligned segments, exact end") {
  std::vector<float> v = {1.5f, -2.0f, 3.25f};
  Tensor t = Tensor::dense(DType::float32, {3}, Bytes::copy_of(le_bytes(v)));
  EncodedBlob b = encode_tensor_blob(t);
  std::string s = concat(b);
  REQUIRE(s.size() == b.size);
  const std::uint64_t header = get_u32(s);
  CHECK(s.substr(8, 4) == "MZTB");
  BlobHeader h = header_of(s);
  CHECK(h.header_end == header + 4);
  CHECK(h.values.offset % 64 == 0);
  CHECK(h.values.offset >= h.header_end);
  CHECK(h.values.offset < h.header_end + 64);
  CHECK(h.values.length == 12);
  CHECK(s.size() == h.values.offset + 12);  // the entry ends where the last segment ends
  CHECK(s.substr(h.values.offset) == le_bytes(v));
  // Padding between header and data is zero.
  CHECK(s.substr(h.header_end, h.values.offset - h.header_end) ==
        std::string(h.values.offset - h.header_end, '\0'));
  CHECK(h.offsets.length == 0);
  CHECK(h.indices.length == 0);
  CHECK_FALSE(h.big_endian);
}

TEST_CASE("Round trip: every dtype, scalars, empty tensors, strings, sparse") {
  std::vector<Tensor> tensors;
  for (DType d : kAllDTypes) {
    if (d == DType::utf8) continue;
    std::size_t w = dtype_size(d);
    std::string data(6 * w, '\0');
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 37 + 1);
    if (d == DType::bool_)
      for (auto& c : data) c = static_cast<char>(c & 1);
    tensors.push_back(Tensor::dense(d, {2, 3}, Bytes::copy_of(data)));
    tensors.push_back(Tensor::dense(d, {}, Bytes::copy_of(data.substr(0, w))));  // scalar
    tensors.push_back(Tensor::dense(d, {0, 5}, Bytes()));                        // empty
  }
  tensors.push_back(
      Tensor::strings({2, 2}, std::vector<std::string>{"", "a", "\xC3\xA9t\xC3\xA9", "x y\n"}));
  tensors.push_back(Tensor::strings({0}, std::vector<std::string>{}));
  tensors.push_back(Tensor::strings({}, std::vector<std::string>{"scalar"}));
  std::vector<std::int64_t> idx = {0, 1, 2, 0};
  tensors.push_back(Tensor::sparse_coo(DType::float64, {3, 2}, 2, Bytes::copy_of(le_bytes(idx)),
                                       Bytes::copy_of(le_bytes(std::vector<double>{1.0, -1.0}))));
  tensors.push_back(Tensor::sparse_coo(DType::int32, {4, 4}, 0, Bytes(), Bytes()));
  for (const Tensor& t : tensors) {
    INFO("dtype " << dtype_name(t.dtype()) << " rank " << t.rank());
    std::string s = concat(encode_tensor_blob(t));
    Tensor back = decode(s);
    CHECK(back == t);
    BlobHeader h = header_of(s);
    for (const Segment* seg : {&h.values, &h.offsets, &h.indices})
      if (seg->length) CHECK(seg->offset % 64 == 0);
  }
}

TEST_CASE("Decoding is zero-copy when aligned, copies when not") {
  std::vector<double> v = {1, 2, 3, 4};
  std::string s =
      concat(encode_tensor_blob(Tensor::dense(DType::float64, {4}, Bytes::copy_of(le_bytes(v)))));
  Bytes entry = Bytes::copy_of(s);  // copy_of gives malloc alignment (>= 16)
  Tensor t = decode_tensor_blob(entry, {});
  BlobHeader h = header_of(s);
  CHECK(t.values().data() == entry.data() + h.values.offset);
  CHECK(t.as<double>()[3] == 4.0);
  // The same bytes at an odd address: values are copied into aligned memory.
  std::string shifted = "x" + s;
  Bytes big = Bytes::copy_of(shifted);
  Bytes odd = big.slice(1, s.size());
  Tensor u = decode_tensor_blob(odd, {});
  CHECK(reinterpret_cast<std::uintptr_t>(u.values().data()) % 8 == 0);
  CHECK(u.as<double>()[0] == 1.0);
  CHECK(u == t);
}

TEST_CASE("Header rule 1: size prefix, FlatBuffer limit, verifier, identifier") {
  CHECK_ERROR(header_of(""), ErrorCode::corrupt, "shorter than its 4-byte size prefix");
  CHECK_ERROR(header_of("abc"), ErrorCode::corrupt, "shorter than its 4-byte size prefix");
  std::string huge("\xFF\xFF\xFF\x7F", 4);
  CHECK_ERROR(header_of(huge + "rest"), ErrorCode::limit_exceeded,
              "header of 2147483647 bytes exceeds the limit of 67108864");
  std::string lying;
  put_u32(lying, 100);
  lying += std::string(50, '\0');
  CHECK_ERROR(header_of(lying), ErrorCode::corrupt, "header size 100 exceeds the entry (54 bytes)");
  Limits small;
  small.max_flatbuffer_bytes = 16;
  CHECK_ERROR(header_of(concat(encode_tensor_blob(
                            Tensor::dense(DType::int8, {1}, Bytes::copy_of(std::string("x"))))),
                        small),
              ErrorCode::limit_exceeded, "exceeds the limit of 16");
  // A prefix shorter than the header it announces.
  std::string good = blob_entry(dense_f32({2}, 2), std::string(8, '\0'));
  CHECK_ERROR(read_blob_header(span_of(good).subspan(0, 10), good.size(), {}), ErrorCode::corrupt,
              "header is truncated");
  CHECK(blob_header_size(span_of(good), good.size(), {}) == get_u32(good) + 4);
  // Garbage, a zero-size FlatBuffer, a missing identifier.
  std::string garbage;
  put_u32(garbage, 40);
  garbage += std::string(40, '\xAB');
  CHECK_ERROR(header_of(garbage), ErrorCode::corrupt, "fails verification");
  std::string empty_fb;
  put_u32(empty_fb, 0);
  CHECK_ERROR(header_of(empty_fb), ErrorCode::corrupt, "fails verification");
  BlobSpec no_id = dense_f32({2}, 2);
  no_id.identifier = false;
  CHECK_ERROR(header_of(blob_entry(no_id, std::string(8, '\0'))), ErrorCode::corrupt,
              "lacks the MZTB identifier");
}

TEST_CASE("Header rule 1: FlatBuffers with out-of-range offsets fail verification") {
  BlobSpec spec = dense_f32({2, 3}, 6);
  const std::string good = blob_entry(spec, std::string(24, '\0'));
  REQUIRE(header_of(good).shape == Shape{2, 3});
  const std::uint64_t fb_end = get_u32(good) + 4;
  SUBCASE("root offset past the buffer") {
    std::string s = good;
    patch_u32(s, 4, 0x7FFFFFF0u);
    CHECK_ERROR(header_of(s), ErrorCode::corrupt, "fails verification");
  }
  SUBCASE("every 4-byte word of the FlatBuffer set to a huge or odd value") {
    // Each patch either still verifies (the word was data) or fails cleanly;
    // verification never reads outside the header.
    for (std::uint64_t at = 4; at + 4 <= fb_end; at += 4) {
      for (std::uint32_t v : {0x7FFFFFFFu, 0xFFFFFFFFu, 0x80000000u, 1u, 3u}) {
        std::string s = good;
        patch_u32(s, at, v);
        auto err = caught([&] { (void)header_of(s); });
        if (err)
          CHECK((err->code() == ErrorCode::corrupt || err->code() == ErrorCode::unsupported ||
                 err->code() == ErrorCode::limit_exceeded));
      }
    }
  }
  SUBCASE("the shape vector's length runs past the buffer") {
    // Find the shape vector: its length word (2) is followed by 2 and 3 as int64.
    std::size_t pos = std::string::npos;
    for (std::size_t i = 4; i + 4 + 16 <= fb_end; i += 4)
      if (get_u32(good, i) == 2 && (get_u64(good, i + 4) == 2 || get_u64(good, i + 8) == 2)) {
        pos = i;
        break;
      }
    REQUIRE(pos != std::string::npos);
    std::string s = good;
    patch_u32(s, pos, 1000000);
    CHECK_ERROR(header_of(s), ErrorCode::corrupt, "fails verification");
  }
}

TEST_CASE("Header rule 2: dtype, rank, dimensions, numel, layout, byte order, alignment") {
  // 2 is DL4J's FLOAT8, which never said which 8-bit format it meant.
  for (int code : {0, 2, 4, 15, 16, 24, 49, 51, 52, 100, 127, -1}) {
    BlobSpec s = dense_f32({1}, 1);
    s.dtype = code;
    INFO("dtype " << code);
    CHECK_ERROR(header_of(blob_entry(s, std::string(4, '\0'))), ErrorCode::unsupported,
                "data type " + std::to_string(code) + " is not supported");
  }
  {
    BlobSpec s = dense_f32(std::vector<std::int64_t>(65, 1), 1);
    CHECK_ERROR(header_of(blob_entry(s, std::string(4, '\0'))), ErrorCode::limit_exceeded,
                "rank 65 exceeds the limit of 64");
    BlobSpec ok = dense_f32(std::vector<std::int64_t>(64, 1), 1);
    CHECK(header_of(blob_entry(ok, std::string(4, '\0'))).shape.size() == 64);
    Limits small;
    small.max_rank = 2;
    BlobSpec r3 = dense_f32({1, 1, 1}, 1);
    CHECK_ERROR(header_of(blob_entry(r3, std::string(4, '\0')), small), ErrorCode::limit_exceeded,
                "rank 3 exceeds the limit of 2");
  }
  {
    BlobSpec s = dense_f32({2, -3}, 6);
    CHECK_ERROR(header_of(blob_entry(s, std::string(24, '\0'))), ErrorCode::corrupt,
                "negative dimension -3");
  }
  {
    // 2^32 x 2^32 elements overflow 64 bits; so does numel x 4 for 2^62.
    BlobSpec s = dense_f32({1ll << 32, 1ll << 32}, 0);
    CHECK_ERROR(header_of(blob_entry(s, "")), ErrorCode::corrupt, "overflows 64 bits");
    BlobSpec t = dense_f32({1ll << 62}, 0);
    CHECK_ERROR(header_of(blob_entry(t, "")), ErrorCode::corrupt, "overflows 64 bits");
    // A huge dimension times zero is an empty tensor.
    BlobSpec z = dense_f32({0, 1ll << 62}, 0);
    z.values = std::nullopt;
    CHECK(header_of(blob_entry(z, "")).data_bytes() == 0);
  }
  {
    BlobSpec s = dense_f32({1}, 1);
    s.layout = 3;  // 2 is QUANTIZED since section 6.1 (which readers before it refused like this)
    CHECK_ERROR(header_of(blob_entry(s, std::string(4, '\0'))), ErrorCode::unsupported,
                "unknown layout 3");
    s.layout = -1;
    CHECK_ERROR(header_of(blob_entry(s, std::string(4, '\0'))), ErrorCode::unsupported,
                "unknown layout");
  }
  {
    BlobSpec s = dense_f32({1}, 1);
    s.byte_order = 2;
    CHECK_ERROR(header_of(blob_entry(s, std::string(4, '\0'))), ErrorCode::unsupported,
                "unknown byte order");
  }
  for (std::uint32_t a : {0u, 1u, 4u, 48u, 65u, 8192u, 0x80000000u}) {
    BlobSpec s = dense_f32({1}, 1);
    s.alignment = a;
    INFO("alignment " << a);
    CHECK_ERROR(header_of(blob_entry(s, std::string(4, '\0'))), ErrorCode::corrupt,
                "alignment " + std::to_string(a) + " is not a power of two from 8 to 4096");
  }
  for (std::uint32_t a : {8u, 16u, 4096u}) {
    BlobSpec s = dense_f32({1}, 1);
    s.alignment = a;
    s.values->first = 4096;
    CHECK(header_of(blob_entry(s, std::string(4, '\0'), 4096)).values.offset == 4096);
  }
}

TEST_CASE("Header rule 3: segment lengths must be what dtype and shape imply") {
  SUBCASE("dense values too short or too long") {
    BlobSpec s = dense_f32({2, 3}, 6);
    s.values->second = 20;
    CHECK_ERROR(header_of(blob_entry(s, std::string(24, '\0'))), ErrorCode::corrupt,
                "values segment holds 20 bytes, the header implies 24");
    s.values->second = 28;
    CHECK_ERROR(header_of(blob_entry(s, std::string(28, '\0'))), ErrorCode::corrupt,
                "values segment holds 28 bytes, the header implies 24");
  }
  SUBCASE("a missing values segment of a scalar") {
    BlobSpec s;
    s.shape = std::nullopt;  // absent shape: a scalar
    CHECK_ERROR(header_of(blob_entry(s, "")), ErrorCode::corrupt,
                "values segment holds 0 bytes, the header implies 4");
  }
  SUBCASE("dense with offsets or indices or nnz") {
    BlobSpec s = dense_f32({2}, 2);
    s.offsets = {s.values->first + 64, 8};
    CHECK_ERROR(header_of(blob_entry(s, std::string(72, '\0'))), ErrorCode::corrupt,
                "offsets segment holds 8 bytes, the header implies 0");
    s = dense_f32({2}, 2);
    s.indices = {s.values->first + 64, 8};
    CHECK_ERROR(header_of(blob_entry(s, std::string(72, '\0'))), ErrorCode::corrupt,
                "indices segment holds 8 bytes, the header implies 0");
    s = dense_f32({2}, 2);
    s.nnz = 1;
    CHECK_ERROR(header_of(blob_entry(s, std::string(8, '\0'))), ErrorCode::corrupt,
                "nnz must be 0 for a dense tensor");
  }
  SUBCASE("utf8: offsets are (numel + 1) x 8, values any length") {
    BlobSpec s;
    s.dtype = 50;
    s.shape = std::vector<std::int64_t>{2};
    const std::uint64_t at = blob_data_offset(s);
    s.offsets = {at, 24};
    s.values = {at + 64, 3};
    std::string data = le_bytes(std::vector<std::uint64_t>{0, 1, 3});
    data.resize(64, '\0');
    data += "abc";
    Tensor t = decode(blob_entry(s, data));
    CHECK(t.string_at(0) == "a");
    CHECK(t.string_at(1) == "bc");
    s.offsets->second = 16;
    CHECK_ERROR(header_of(blob_entry(s, data)), ErrorCode::corrupt,
                "offsets segment holds 16 bytes, the header implies 24");
  }
  SUBCASE("sparse: nnz, values and indices") {
    BlobSpec s;
    s.dtype = 9;  // INT32
    s.layout = 1;
    s.shape = std::vector<std::int64_t>{3, 4};
    s.nnz = 2;
    const std::uint64_t at = blob_data_offset(s);
    s.values = {at, 8};
    s.indices = {at + 64, 32};
    std::string data = le_bytes(std::vector<std::int32_t>{7, -7});
    data.resize(64, '\0');
    data += le_bytes(std::vector<std::int64_t>{0, 3, 2, 0});
    Tensor t = decode(blob_entry(s, data));
    CHECK(t.layout() == Layout::sparse_coo);
    CHECK(t.nnz() == 2);
    CHECK(t.as<std::int32_t>()[1] == -7);
    BlobSpec bad = s;
    bad.nnz = 13;  // more than 3 x 4
    CHECK_ERROR(header_of(blob_entry(bad, data)), ErrorCode::corrupt,
                "nnz 13 exceeds the element count");
    bad = s;
    bad.indices->second = 24;
    CHECK_ERROR(header_of(blob_entry(bad, data)), ErrorCode::corrupt,
                "indices segment holds 24 bytes, the header implies 32");
    bad = s;
    bad.values->second = 4;
    CHECK_ERROR(header_of(blob_entry(bad, data)), ErrorCode::corrupt,
                "values segment holds 4 bytes, the header implies 8");
    bad = s;
    bad.dtype = 50;
    CHECK_ERROR(header_of(blob_entry(bad, data)), ErrorCode::corrupt,
                "sparse tensors of strings are not supported");
    // nnz x rank x 8 overflows.
    bad = s;
    bad.shape = std::vector<std::int64_t>{1ll << 62, 1ll << 0};
    bad.nnz = 1ull << 61;
    CHECK_ERROR(header_of(blob_entry(bad, data)), ErrorCode::corrupt, "overflows 64 bits");
    // A coordinate outside its dimension is found when decoding.
    std::string out_of_range = le_bytes(std::vector<std::int32_t>{7, -7});
    out_of_range.resize(64, '\0');
    out_of_range += le_bytes(std::vector<std::int64_t>{0, 3, 3, 0});
    REQUIRE_ERROR_AS(err, decode(blob_entry(s, out_of_range)), ErrorCode::corrupt,
                     "COO coordinate 3 of value 1 is outside dimension 0 of size 3");
    CHECK(err.message().rfind("tensor blob: ", 0) == 0);
    std::string negative = le_bytes(std::vector<std::int32_t>{7, -7});
    negative.resize(64, '\0');
    negative += le_bytes(std::vector<std::int64_t>{0, -1, 2, 0});
    CHECK_ERROR(decode(blob_entry(s, negative)), ErrorCode::corrupt, "COO coordinate -1");
  }
}

TEST_CASE("Header rule 4: segments aligned, inside the data area, not overlapping") {
  SUBCASE("misaligned") {
    BlobSpec s = dense_f32({2}, 2);
    s.values->first += 4;
    CHECK_ERROR(header_of(blob_entry(s, std::string(12, '\0'))), ErrorCode::corrupt,
                "is not a multiple of 64");
    s.alignment = 8;
    s.values->first = blob_data_offset(s) + 8;
    CHECK(header_of(blob_entry(s, std::string(16, '\0'))).values.offset == s.values->first);
  }
  SUBCASE("inside the header") {
    BlobSpec s = dense_f32({2}, 2);
    s.alignment = 8;
    s.values->first = 0;
    CHECK_ERROR(header_of(blob_entry(s, std::string(8, '\0'))), ErrorCode::corrupt,
                "is outside the data area");
    s.values->first = 8;
    CHECK_ERROR(header_of(blob_entry(s, std::string(8, '\0'))), ErrorCode::corrupt,
                "is outside the data area");
  }
  SUBCASE("past the end of the entry, and offset + length overflowing") {
    BlobSpec s = dense_f32({2}, 2);
    CHECK_ERROR(header_of(blob_entry(s, std::string(7, '\0'))), ErrorCode::corrupt,
                "is outside the data area");
    s.values->first = 0xFFFFFFFFFFFFFFC0ull;  // aligned, + 8 overflows
    CHECK_ERROR(header_of(blob_entry(s, std::string(8, '\0'))), ErrorCode::corrupt,
                "is outside the data area");
  }
  SUBCASE("overlapping segments") {
    BlobSpec s;
    s.dtype = 50;
    s.shape = std::vector<std::int64_t>{1};
    const std::uint64_t at = blob_data_offset(s);
    s.offsets = {at, 16};
    s.values = {at, 4};
    std::string data = le_bytes(std::vector<std::uint64_t>{0, 4});
    CHECK_ERROR(header_of(blob_entry(s, data)), ErrorCode::corrupt, "overlap");
    s.values = {at + 64, 4};
    s.offsets = {at, 16};
    data.resize(64, '\0');
    data += "abcd";
    CHECK(decode(blob_entry(s, data)).string_at(0) == "abcd");
  }
  SUBCASE("an empty segment's offset is ignored") {
    BlobSpec s = dense_f32({2}, 2);
    s.offsets = {12345, 0};
    s.indices = {3, 0};
    CHECK(header_of(blob_entry(s, std::string(8, '\0'))).offsets.length == 0);
  }
}

TEST_CASE("Rule 5: string offsets and UTF-8 are checked when decoding") {
  BlobSpec s;
  s.dtype = 50;
  s.shape = std::vector<std::int64_t>{2};
  const std::uint64_t at = blob_data_offset(s);
  s.offsets = {at, 24};
  s.values = {at + 64, 4};
  auto with = [&](std::vector<std::uint64_t> offs, std::string strings) {
    std::string data = le_bytes(offs);
    data.resize(64, '\0');
    return blob_entry(s, data + strings);
  };
  CHECK(decode(with({0, 2, 4}, "abcd")).string_at(1) == "cd");
  CHECK_ERROR(decode(with({1, 2, 4}, "abcd")), ErrorCode::corrupt, "string offset 0 (1)");
  CHECK_ERROR(decode(with({0, 3, 2}, "abcd")), ErrorCode::corrupt, "is not monotone");
  CHECK_ERROR(decode(with({0, 2, 9}, "abcd")), ErrorCode::corrupt, "is not monotone");
  CHECK_ERROR(decode(with({0, 2, 3}, "abcd")), ErrorCode::corrupt,
              "the last string offset must equal the string bytes");
  CHECK_ERROR(decode(with({0, 1, 4}, "\xC3\xA9xy")), ErrorCode::corrupt,
              "string 0 is not valid UTF-8");  // the split cuts the 2-byte sequence
  CHECK_ERROR(decode(with({0, ~0ull, 4}, "abcd")), ErrorCode::corrupt, "not monotone");
}

TEST_CASE("Big-endian blobs decode to native values") {
  SUBCASE("float32") {
    BlobSpec s = dense_f32({2}, 2);
    s.byte_order = 1;
    Tensor t = decode(blob_entry(s, std::string("\x3F\x80\x00\x00\xC0\x00\x00\x00", 8)));
    REQUIRE(t.values().size() == 8);
    CHECK(t.as<float>()[0] == 1.0f);
    CHECK(t.as<float>()[1] == -2.0f);
  }
  SUBCASE("int16, int64, float64, float16") {
    BlobSpec s;
    s.byte_order = 1;
    s.dtype = 8;  // INT16
    s.shape = std::vector<std::int64_t>{3};
    s.values = {blob_data_offset(s), 6};
    Tensor a = decode(blob_entry(s, std::string("\x01\x02\xFF\xFE\x00\x05", 6)));
    CHECK(a.as<std::int16_t>()[0] == 0x0102);
    CHECK(a.as<std::int16_t>()[1] == -2);
    CHECK(a.as<std::int16_t>()[2] == 5);
    s.dtype = 10;  // INT64
    s.values->second = 24;
    Tensor b =
        decode(blob_entry(s, be_bytes(std::vector<std::int64_t>{1, -1, 0x0102030405060708})));
    CHECK(b.as<std::int64_t>()[0] == 1);
    CHECK(b.as<std::int64_t>()[1] == -1);
    CHECK(b.as<std::int64_t>()[2] == 0x0102030405060708);
    s.dtype = 6;  // DOUBLE: 0.5 is 3FE0000000000000
    s.shape = std::vector<std::int64_t>{1};
    s.values->second = 8;
    CHECK(decode(blob_entry(s, std::string("\x3F\xE0\0\0\0\0\0\0", 8))).as<double>()[0] == 0.5);
    s.dtype = 3;  // HALF: 1.0 is 0x3C00
    s.values->second = 2;
    CHECK(decode(blob_entry(s, std::string("\x3C\x00", 2))).values().as_string_view() ==
          std::string_view("\x00\x3C", 2));
  }
  SUBCASE("complex: the real and imaginary parts are swapped each on its own") {
    BlobSpec s;
    s.byte_order = 1;
    s.dtype = 20;  // COMPLEX64: 1.0 + -2.0i is 3F800000 C0000000 big-endian
    s.shape = std::vector<std::int64_t>{2};
    s.values = {blob_data_offset(s), 16};
    Tensor c = decode(blob_entry(
        s, std::string("\x3F\x80\x00\x00\xC0\x00\x00\x00\x00\x00\x00\x00\x3F\x00\x00\x00", 16)));
    REQUIRE(c.dtype() == DType::complex64);
    // 1 - 2i, 0 + 0.5i: little-endian float32 parts, real first.
    CHECK(c.as<std::complex<float>>()[0] == std::complex<float>(1, -2));
    CHECK(c.as<std::complex<float>>()[1] == std::complex<float>(0, 0.5f));
    s.dtype = 21;  // COMPLEX128: 0.5 - 1.0i is 3FE0000000000000 BFF0000000000000
    s.shape = std::vector<std::int64_t>{1};
    Tensor d = decode(blob_entry(s, std::string("\x3F\xE0\0\0\0\0\0\0\xBF\xF0\0\0\0\0\0\0", 16)));
    REQUIRE(d.dtype() == DType::complex128);
    CHECK(d.as<std::complex<double>>()[0] == std::complex<double>(0.5, -1));
  }
  SUBCASE("one-byte types are unchanged") {
    BlobSpec s;
    s.byte_order = 1;
    s.dtype = 11;  // UINT8
    s.shape = std::vector<std::int64_t>{3};
    s.values = {blob_data_offset(s), 3};
    CHECK(decode(blob_entry(s, "\x01\x02\x03")).values().as_string_view() == "\x01\x02\x03");
  }
  SUBCASE("strings: big-endian offsets") {
    BlobSpec s;
    s.byte_order = 1;
    s.dtype = 50;
    s.shape = std::vector<std::int64_t>{2};
    const std::uint64_t at = blob_data_offset(s);
    s.offsets = {at, 24};
    s.values = {at + 64, 5};
    std::string data = be_bytes(std::vector<std::uint64_t>{0, 2, 5});
    data.resize(64, '\0');
    Tensor t = decode(blob_entry(s, data + "hi\xC3\xA9!"));
    CHECK(t.string_at(0) == "hi");
    CHECK(t.string_at(1) == "\xC3\xA9!");
  }
  SUBCASE("sparse: big-endian indices and values") {
    BlobSpec s;
    s.byte_order = 1;
    s.dtype = 13;  // UINT32
    s.layout = 1;
    s.shape = std::vector<std::int64_t>{5};
    s.nnz = 2;
    const std::uint64_t at = blob_data_offset(s);
    s.values = {at, 8};
    s.indices = {at + 64, 16};
    std::string data = be_bytes(std::vector<std::uint32_t>{0xA0B0C0D0u, 9});
    data.resize(64, '\0');
    data += be_bytes(std::vector<std::int64_t>{4, 1});
    Tensor t = decode(blob_entry(s, data));
    CHECK(t.as<std::uint32_t>()[0] == 0xA0B0C0D0u);
    CHECK(t.as<std::uint32_t>()[1] == 9u);
    CHECK(t.indices().as_string_view() == le_bytes(std::vector<std::int64_t>{4, 1}));
    // Coordinates are checked after conversion: 4 < 5 passes, 5 would not.
    std::string bad = be_bytes(std::vector<std::uint32_t>{1, 2});
    bad.resize(64, '\0');
    bad += be_bytes(std::vector<std::int64_t>{5, 1});
    CHECK_ERROR(decode(blob_entry(s, bad)), ErrorCode::corrupt, "COO coordinate 5");
  }
}

TEST_CASE("FlatBuffers field alignment is checked (FORMAT.md section 6, rule 1)") {
  // The header's u64 field `nnz` (field 7 of TensorHeader) moved by 4 bytes
  // inside its table: every byte is still inside the buffer, only the
  // alignment is wrong.
  BlobSpec spec = dense_f32({2}, 2);
  spec.nnz = 0;  // written anyway (ForceDefaults)
  const std::string good = blob_entry(spec, std::string(8, '\0'));
  REQUIRE_NOTHROW(header_of(good));
  auto i32 = [&](std::size_t at) { return static_cast<std::int32_t>(get_u32(good, at)); };
  auto u16 = [&](std::size_t at) {
    return static_cast<std::uint16_t>(static_cast<unsigned char>(good[at]) |
                                      (static_cast<unsigned char>(good[at + 1]) << 8));
  };
  const std::size_t table = 4 + get_u32(good, 4);  // the root offset counts from byte 4
  const std::size_t vtable = table - static_cast<std::size_t>(i32(table));
  const std::uint16_t table_size = u16(vtable + 2);
  const std::size_t nnz_slot = vtable + 4 + 2 * 7;
  const std::uint16_t nnz_at = u16(nnz_slot);
  REQUIRE(nnz_at != 0);
  REQUIRE((table + nnz_at) % 8 == 0);  // where a builder puts it
  const std::uint16_t moved = nnz_at + 12 <= table_size ? nnz_at + 4 : nnz_at - 4;
  REQUIRE(moved >= 4);
  std::string bad = good;
  bad[nnz_slot] = static_cast<char>(moved & 0xFF);
  bad[nnz_slot + 1] = static_cast<char>(moved >> 8);
  CHECK_ERROR(header_of(bad), ErrorCode::corrupt, "fails verification");
}

TEST_CASE("An absent shape is a scalar, exactly like an empty one (FORMAT.md section 6)") {
  BlobSpec absent;
  absent.shape = std::nullopt;
  absent.values = {0, 4};
  absent.values->first = blob_data_offset(absent);
  BlobSpec empty = absent;
  empty.shape = std::vector<std::int64_t>{};
  const std::string value = le_bytes(std::vector<float>{2.5f});
  const Tensor a = decode(blob_entry(absent, value));
  const Tensor e = decode(blob_entry(empty, value));
  CHECK(a.rank() == 0);
  CHECK(a.numel() == 1);
  CHECK(a.as<float>()[0] == 2.5f);
  CHECK(a == e);
}

TEST_CASE("The 8-bit float types 18 and 19: one byte per element") {
  // Four bytes of hand-built data: e4m3fn 1.0, -448, NaN, 2^-9 (FORMAT.md section 6).
  const std::string data = "\x38\xFE\x7F\x01";
  for (int code : {18, 19}) {
    INFO("dtype " << code);
    const BlobSpec s = dense_of(code, {2, 2}, 4);
    const std::string entry = blob_entry(s, data);
    BlobHeader h = header_of(entry);
    CHECK(h.dtype == (code == 18 ? DType::float8_e4m3fn : DType::float8_e5m2));
    CHECK(h.values.length == 4);
    Tensor t = decode(entry);
    CHECK(t.dtype() == h.dtype);
    CHECK(t.values().as_string_view() == data);
    // The values segment is one byte per element: 3 bytes for 4 elements lie.
    check_one_byte_short_refused(s, data);
  }
}

TEST_CASE("The MX types 22 and 23: one byte per element (an FP4 element is a pair), never sparse") {
  // e8m0fnu 2^0, 2^1, 2^-127, NaN; e2m1 pairs (0.5, 1), (6, -0.5), (0, 6), (-0, -6), each
  // byte's first value in its low nibble (FORMAT.md section 6).
  for (int code : {22, 23}) {
    INFO("dtype " << code);
    const std::string data(code == 22 ? "\x7F\x80\x00\xFF" : "\x21\x97\x70\xF8", 4);
    const BlobSpec s = dense_of(code, {2, 2}, 4);
    const std::string entry = blob_entry(s, data);
    BlobHeader h = header_of(entry);
    CHECK(h.dtype == (code == 22 ? DType::float8_e8m0fnu : DType::float4_e2m1fn_x2));
    CHECK(h.values.length == 4);
    Tensor t = decode(entry);
    CHECK(t.dtype() == h.dtype);
    CHECK(t.numel() == 4);  // FP4: 4 pairs, 8 values
    CHECK(t.values().as_string_view() == data);
    CHECK(t.as<std::uint8_t>()[1] == static_cast<std::uint8_t>(data[1]));
    check_one_byte_short_refused(s, data);
    // SPARSE_COO has no meaning for them (no zero; a pair is two values).
    BlobSpec sparse;
    sparse.dtype = code;
    sparse.layout = 1;
    sparse.shape = std::vector<std::int64_t>{3, 4};
    sparse.nnz = 2;
    const std::uint64_t at = blob_data_offset(sparse);
    sparse.values = {at, 2};
    sparse.indices = {at + 64, 32};
    std::string coo = data.substr(0, 2);
    coo.resize(64, '\0');
    coo += le_bytes(std::vector<std::int64_t>{0, 3, 2, 0});
    CHECK_ERROR(
        header_of(blob_entry(sparse, coo)), ErrorCode::corrupt,
        "tensor blob: sparse " + std::string(dtype_name(h.dtype)) + " tensors are not allowed");
    CHECK_ERROR(Tensor::sparse_coo(h.dtype, {3, 4}, 2,
                                   Bytes::copy_of(le_bytes(std::vector<std::int64_t>{0, 3, 2, 0})),
                                   Bytes::copy_of(data.substr(0, 2))),
                ErrorCode::invalid_argument, "sparse " + std::string(dtype_name(h.dtype)));
  }
}

TEST_CASE("The complex types 20 and 21: two IEEE parts per element, real first") {
  // complex64 [1 + 2i, -0.5 + 0i]; complex128 [3 - 4i] (FORMAT.md section 6).
  const std::string c64("\x00\x00\x80\x3F\x00\x00\x00\x40\x00\x00\x00\xBF\x00\x00\x00\x00", 16);
  const std::string c128("\0\0\0\0\0\0\x08\x40\0\0\0\0\0\0\x10\xC0", 16);
  for (int code : {20, 21}) {
    INFO("dtype " << code);
    const BlobSpec s = dense_of(code, {code == 20 ? 2 : 1}, 16);
    const std::string& data = code == 20 ? c64 : c128;
    const std::string entry = blob_entry(s, data);
    BlobHeader h = header_of(entry);
    CHECK(h.dtype == (code == 20 ? DType::complex64 : DType::complex128));
    Tensor t = decode(entry);
    CHECK(t.values().as_string_view() == data);
    if (code == 20) {
      CHECK(t.as<std::complex<float>>()[0] == std::complex<float>(1, 2));
      CHECK(t.as<std::complex<float>>()[1] == std::complex<float>(-0.5f, 0));
      CHECK_THROWS_AS(t.as<float>(), Error);  // an element is two floats
    } else {
      CHECK(t.as<std::complex<double>>()[0] == std::complex<double>(3, -4));
    }
    // 8 or 16 bytes per element: one byte short is corrupt.
    check_one_byte_short_refused(s, data);
  }
}
