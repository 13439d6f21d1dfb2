// Golden quantized blobs, one per scheme and storage, and dense blobs of the
// 8-bit float and complex types (tests/golden/format/): today's writer must produce them
// byte for byte, and flatc (a third-party FlatBuffers reader) must decode
// their headers to the fields written here by hand, with the hand-computed
// integers, scales and zero points at the segment offsets flatc reports.
// Regenerate only for an intended format change:
// MODELZIP_WRITE_QUANT_GOLDEN=1 build/tests/test_format -tc='Golden*'.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <regex>

#include "blob_builder.hpp"
#include "format/tensor_blob.hpp"
#include "modelzip/tensor.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;
namespace fs = std::filesystem;

namespace {

template <class T>
std::string le(std::vector<T> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}
std::string bytes(std::vector<int> v) {
  std::string s;
  for (int x : v) s += static_cast<char>(x);
  return s;
}
Bytes b(const std::string& s) {
  return Bytes::copy_of(s);
}

struct Golden {
  const char* file;
  Tensor tensor;
  std::vector<std::string> json;            // fields flatc must print
  std::string values, scales, zero_points;  // segment contents
  std::vector<float> dequantized;
};

std::vector<Golden> goldens() {
  std::vector<Golden> g;
  {  // float32 [2, 2], int8, scale 0.5, zero point 3; q = 0, 3, -1, -128
    Quantization q;
    q.scale = 0.5;
    q.zero_point = 3;
    std::string v = bytes({0x00, 0x03, 0xFF, 0x80});
    g.push_back(
        {"quant-affine-per-tensor-int8.fb",
         Tensor::quantized(DType::float32, {2, 2}, q, b(v)),
         {"\"dtype\": \"FLOAT\"", "\"layout\": \"QUANTIZED\"", "\"scheme\": \"AFFINE_PER_TENSOR\"",
          "\"storage\": \"INT8\"", "\"scale\": 0.5", "\"zero_point\": 3"},
         v,
         "",
         "",
         {-1.5f, 0.0f, -2.0f, -65.5f}});
  }
  {  // bfloat16 [3], uint8, scale 0.25, zero point 128; q = 0, 128, 255
    Quantization q;
    q.storage = QuantStorage::uint8;
    q.scale = 0.25;
    q.zero_point = 128;
    std::string v = bytes({0x00, 0x80, 0xFF});
    g.push_back({"quant-affine-per-tensor-uint8.fb",
                 Tensor::quantized(DType::bfloat16, {3}, q, b(v)),
                 {"\"dtype\": \"BFLOAT16\"", "\"storage\": \"UINT8\"", "\"scale\": 0.25",
                  "\"zero_point\": 128"},
                 v,
                 "",
                 "",
                 {-32.0f, 0.0f, 31.75f}});
  }
  {  // float16 [2, 3], axis 1: scales 1, 0.5, 2; zero points 0, 2, -1; q = 1..6
    Quantization q;
    q.scheme = QuantScheme::affine_per_axis;
    q.axis = 1;
    q.scale_dtype = DType::float64;
    std::string sc = le<double>({1.0, 0.5, 2.0}), zp = le<std::int64_t>({0, 2, -1});
    q.scales = b(sc);
    q.zero_points = b(zp);
    std::string v = bytes({1, 2, 3, 4, 5, 6});
    g.push_back({"quant-affine-per-axis-int8.fb",
                 Tensor::quantized(DType::float16, {2, 3}, q, b(v)),
                 {"\"dtype\": \"HALF\"", "\"scheme\": \"AFFINE_PER_AXIS\"", "\"axis\": 1",
                  "\"scale_type\": \"DOUBLE\""},
                 v,
                 sc,
                 zp,
                 {1, 0, 8, 4, 1.5f, 14}});
  }
  {  // float32 [2, 5], axis 1, blocks of 2 (per row: 2 + 2 + 1), float32 scales
    Quantization q;
    q.scheme = QuantScheme::block_symmetric;
    q.axis = 1;
    q.block_size = 2;
    q.scale_dtype = DType::float32;
    std::string sc = le<float>({1, 2, 4, 0.5f, 0.25f, 8});
    q.scales = b(sc);
    std::string v = bytes({1, 0xFF, 1, 2, 3, 4, 4, 8, 8, 1});
    g.push_back({"quant-block-int8.fb",
                 Tensor::quantized(DType::float32, {2, 5}, q, b(v)),
                 {"\"scheme\": \"BLOCK_SYMMETRIC\"", "\"block_size\": 2", "\"axis\": 1",
                  "\"scale_type\": \"FLOAT\""},
                 v,
                 sc,
                 "",
                 {1, -1, 2, 4, 12, 2, 2, 2, 2, 8}});
  }
  {  // float32 [3], int4, one block of 32 (partial: 3), float16 scale 0.5;
     // q = 7, -4, 1: byte 0 = 0x7 | 0xC << 4, byte 1 = 0x1 (high nibble 0)
    Quantization q;
    q.scheme = QuantScheme::block_symmetric;
    q.storage = QuantStorage::int4;
    q.axis = 0;
    q.block_size = 32;
    q.scale_dtype = DType::float16;
    std::string sc = le<std::uint16_t>({0x3800});
    q.scales = b(sc);
    std::string v = bytes({0xC7, 0x01});
    g.push_back({"quant-block-int4.fb",
                 Tensor::quantized(DType::float32, {3}, q, b(v)),
                 {"\"storage\": \"INT4\"", "\"block_size\": 32", "\"scale_type\": \"HALF\""},
                 v,
                 sc,
                 "",
                 {3.5f, -2.0f, 0.5f}});
  }
  return g;
}

std::string flatc_json(const fs::path& blob, const TempDir& dir) {
  const char* f = std::getenv("MODELZIP_FLATC");
  std::string cmd = std::string(f ? f : "flatc") +
                    " --json --strict-json --defaults-json --raw-binary --size-prefixed -o " +
                    dir.path().string() + " " +
                    (tests_dir() / ".." / "schemas" / "tensor.fbs").string() + " -- " +
                    blob.string() + " 2>&1";
  INFO(cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);
  return io_bytes(dir / (blob.stem().string() + ".json"));
}

// The {offset, length} flatc prints for segment `name` ({0, 0} when absent,
// as writers leave the segments a scheme does not use).
std::pair<std::uint64_t, std::uint64_t> segment(const std::string& json, const std::string& name) {
  std::smatch m;
  std::regex re("\"" + name + "\": \\{\\s*\"offset\": (\\d+),\\s*\"length\": (\\d+)");
  if (!std::regex_search(json, m, re)) {
    CHECK(json.find("\"" + name + "\"") == std::string::npos);
    return {0, 0};
  }
  return {std::stoull(m[1]), std::stoull(m[2])};
}

}  // namespace

TEST_CASE("Golden quantized blobs: byte for byte, and flatc reads what section 6.1 says") {
  const fs::path dir = tests_dir() / "golden" / "format";
  const bool write = std::getenv("MODELZIP_WRITE_QUANT_GOLDEN") != nullptr;
  TempDir tmp;
  for (const Golden& g : goldens()) {
    INFO(g.file);
    const std::string encoded = concat(format::encode_tensor_blob(g.tensor));
    if (write) {
      fs::create_directories(dir);
      write_file(dir / g.file, encoded);
    }
    const std::string golden = io_bytes(dir / g.file);
    REQUIRE(!golden.empty());
    CHECK(encoded == golden);

    std::string json = flatc_json(dir / g.file, tmp);
    for (const auto& field : g.json)
      CHECK_MESSAGE(json.find(field) != std::string::npos, field, "\n", json);
    // The segments hold the hand-computed bytes where flatc says; writers put
    // the values at the first multiple of 64 after the header.
    std::uint64_t header_end =
        4 + (static_cast<std::uint8_t>(golden[0]) | static_cast<std::uint8_t>(golden[1]) << 8);
    auto [vo, vl] = segment(json, "values");
    CHECK(vo == (header_end + 63) / 64 * 64);
    CHECK(golden.substr(vo, vl) == g.values);
    auto [so, sl] = segment(json, "scales");
    CHECK(sl == g.scales.size());
    if (sl) CHECK(golden.substr(so, sl) == g.scales);
    if (sl) CHECK(so == (vo + vl + 63) / 64 * 64);
    auto [zo, zl] = segment(json, "zero_points");
    CHECK(zl == g.zero_points.size());
    if (zl) CHECK(golden.substr(zo, zl) == g.zero_points);
    // The entry ends where the last segment ends.
    CHECK(golden.size() == std::max({vo + vl, so + sl, zo + zl}));

    Tensor t = format::decode_tensor_blob(Bytes::copy_of(golden), {});
    CHECK(t == g.tensor);
    Tensor f = t.dequantize(DType::float32);
    CHECK(std::vector<float>(f.as<float>().begin(), f.as<float>().end()) == g.dequantized);
  }
}

TEST_CASE("Golden float8 and complex blobs: flatc names the dtype as tensor.fbs does") {
  struct DenseGolden {
    const char* file;
    DType dtype;
    const char* fbs_name;
    std::string values;
  };
  // e4m3fn: 1.0, -448, 2^-9, NaN; e5m2: 1.0, -57344, 2^-16, +inf (FORMAT.md section 6).
  const DenseGolden blobs[] = {
      {"dense-float8-e4m3fn.fb", DType::float8_e4m3fn, "FLOAT8_E4M3FN",
       bytes({0x38, 0xFE, 0x01, 0x7F})},
      {"dense-float8-e5m2.fb", DType::float8_e5m2, "FLOAT8_E5M2", bytes({0x3C, 0xFB, 0x01, 0x7C})},
      // complex64 [[1 + 2i, -0.5 + 0i], [0 - 1i, 4 + 0.25i]]: float32 parts, real first.
      {"dense-complex64.fb", DType::complex64, "COMPLEX64",
       bytes({0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00,
              0xBF, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
              0x80, 0xBF, 0x00, 0x00, 0x80, 0x40, 0x00, 0x00, 0x80, 0x3E})},
      // complex128 [[1 + 2i, -0.5 + 0i], [0 - 1i, 4 + 0.25i]]: float64 parts.
      {"dense-complex128.fb", DType::complex128, "COMPLEX128",
       bytes({0, 0, 0, 0, 0, 0, 0xF0, 0x3F, 0, 0, 0, 0, 0, 0, 0x00, 0x40,
              0, 0, 0, 0, 0, 0, 0xE0, 0xBF, 0, 0, 0, 0, 0, 0, 0x00, 0x00,
              0, 0, 0, 0, 0, 0, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0xF0, 0xBF,
              0, 0, 0, 0, 0, 0, 0x10, 0x40, 0, 0, 0, 0, 0, 0, 0xD0, 0x3F})},
  };
  const fs::path dir = tests_dir() / "golden" / "format";
  const bool write = std::getenv("MODELZIP_WRITE_QUANT_GOLDEN") != nullptr;
  TempDir tmp;
  for (const DenseGolden& g : blobs) {
    INFO(g.file);
    const Tensor t = Tensor::dense(g.dtype, {2, 2}, b(g.values));
    const std::string encoded = concat(format::encode_tensor_blob(t));
    if (write) write_file(dir / g.file, encoded);
    const std::string golden = io_bytes(dir / g.file);
    REQUIRE(!golden.empty());
    CHECK(encoded == golden);
    const std::string json = flatc_json(dir / g.file, tmp);
    CHECK_MESSAGE(json.find("\"dtype\": \"" + std::string(g.fbs_name) + "\"") != std::string::npos,
                  json);
    CHECK_MESSAGE(json.find("\"layout\": \"DENSE\"") != std::string::npos, json);
    auto [vo, vl] = segment(json, "values");
    CHECK(vl == g.values.size());
    CHECK(golden.substr(vo, vl) == g.values);
    CHECK(format::decode_tensor_blob(Bytes::copy_of(golden), {}) == t);
  }
}
