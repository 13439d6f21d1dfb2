// Quantized tensors as plain arrays (src/convert/quantized_arrays.cpp): the
// arrays and descriptions written for each scheme and storage, checked
// against values worked out by hand; write_tensor_file / read_tensor_file
// round trips through .npz and .safetensors give the same quantized tensors;
// npy and BTF refuse; hostile arrays are refused naming the array. The CLI
// side (numpy rebuilding the floats) is tests/cli/test_quantized_export.py.
#include "convert_test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;
using convert::NamedTensor;

namespace {

Bytes raw(std::vector<int> v) {  // bytes from small integers
  std::vector<std::byte> out;
  for (int x : v) out.push_back(static_cast<std::byte>(x));
  return Bytes::take(std::move(out));
}

// bfloat16 [3], uint8, scale 0.25, zero point 128.
NamedTensor per_tensor_uint8() {
  Quantization q;
  q.storage = QuantStorage::uint8;
  q.scale = 0.25;
  q.zero_point = 128;
  return {"pt", Tensor::quantized(DType::bfloat16, {3}, q, raw({0, 128, 255}))};
}

// float16 [2, 3], int8, axis 1: scales 1, 0.5, 2; zero points 0, 2, -1.
NamedTensor per_axis_int8() {
  Quantization q;
  q.scheme = QuantScheme::affine_per_axis;
  q.axis = 1;
  q.scale_dtype = DType::float64;
  q.scales = bytes_of_values<double>({1.0, 0.5, 2.0});
  q.zero_points = bytes_of_values<std::int64_t>({0, 2, -1});
  return {"pa", Tensor::quantized(DType::float16, {2, 3}, q, raw({1, 2, 3, 4, 5, 0x80}))};
}

// float32 [3, 3], int4, axis 0: one row of 9, blocks of 4 (4 + 4 + 1),
// float32 scales 1, 2, 4; values -8, -1, 0, 7, 1, 2, 3, 4, -3 (odd count:
// the last high nibble is 0).
NamedTensor block_int4() {
  Quantization q;
  q.scheme = QuantScheme::block_symmetric;
  q.storage = QuantStorage::int4;
  q.axis = 0;
  q.block_size = 4;
  q.scale_dtype = DType::float32;
  q.scales = bytes_of_values<float>({1, 2, 4});
  return {"b4", Tensor::quantized(DType::float32, {3, 3}, q, raw({0xF8, 0x70, 0x21, 0x43, 0x0D}))};
}

// float32 [2, 2, 3], int8, axis 1: rows of 6, blocks of 4 (4 + 2), float16
// scales (1.0, 0.5) per row.
NamedTensor block_int8() {
  Quantization q;
  q.scheme = QuantScheme::block_symmetric;
  q.axis = 1;
  q.block_size = 4;
  q.scale_dtype = DType::float16;
  q.scales = bytes_of_values<std::uint16_t>({0x3C00, 0x3800, 0x3C00, 0x3800});
  return {"b8", Tensor::quantized(DType::float32, {2, 2, 3}, q,
                                  raw({1, 2, 3, 4, 5, 6, 0xFF, 0xFE, 0xFD, 0xFC, 0xFB, 0xFA}))};
}

std::vector<NamedTensor> all() {
  return {per_tensor_uint8(),
          per_axis_int8(),
          block_int4(),
          block_int8(),
          {"plain", dense<float>(DType::float32, {2}, {1.5f, -2})}};
}

const Tensor& named(const std::vector<NamedTensor>& v, const std::string& name) {
  return find_tensor(v, name);
}

}  // namespace

TEST_CASE("quantized_to_arrays: integers, scales, zero points and descriptions by hand") {
  convert::StringMap meta;
  const auto tensors = all();
  const auto arrays =
      convert::quantized_to_arrays(tensors, convert::TensorFormat::safetensors, meta);
  CHECK(arrays.size() == 3 + 3 + 2 + 2 + 1);  // no zero points for the block schemes

  const Tensor& pt = named(arrays, "pt");
  CHECK(pt.dtype() == DType::uint8);
  CHECK(values_of<std::uint8_t>(pt) == std::vector<std::uint8_t>{0, 128, 255});
  CHECK(named(arrays, "pt.scales").shape().empty());
  CHECK(values_of<double>(named(arrays, "pt.scales")) == std::vector<double>{0.25});
  CHECK(values_of<std::int64_t>(named(arrays, "pt.zero_points")) == std::vector<std::int64_t>{128});
  CHECK(meta.at("pt.quantization") ==
        R"({"version":1,"scheme":"affine-per-tensor","storage":"uint8","bits":8,)"
        R"("dtype":"bfloat16"})");

  CHECK(named(arrays, "pa").dtype() == DType::int8);
  CHECK(values_of<std::int8_t>(named(arrays, "pa")) ==
        std::vector<std::int8_t>{1, 2, 3, 4, 5, -128});
  CHECK(named(arrays, "pa.scales").shape() == Shape{3});
  CHECK(named(arrays, "pa.zero_points").dtype() == DType::int64);
  CHECK(values_of<std::int64_t>(named(arrays, "pa.zero_points")) ==
        std::vector<std::int64_t>{0, 2, -1});
  CHECK(meta.at("pa.quantization") ==
        R"({"version":1,"scheme":"affine-per-axis","storage":"int8","bits":8,"axis":1,)"
        R"("dtype":"float16"})");

  const Tensor& b4 = named(arrays, "b4");  // unpacked, low nibble first
  CHECK(b4.dtype() == DType::int8);
  CHECK(b4.shape() == Shape{3, 3});
  CHECK(values_of<std::int8_t>(b4) == std::vector<std::int8_t>{-8, -1, 0, 7, 1, 2, 3, 4, -3});
  CHECK(named(arrays, "b4.scales").dtype() == DType::float32);
  CHECK(named(arrays, "b4.scales").shape() == Shape{3});  // shape[:0] + [3 blocks]
  CHECK(meta.at("b4.quantization") ==
        R"({"version":1,"scheme":"block-symmetric","storage":"int4","bits":4,"axis":0,)"
        R"("block_size":4,"dtype":"float32"})");

  CHECK(named(arrays, "b8.scales").dtype() == DType::float16);
  CHECK(named(arrays, "b8.scales").shape() == Shape{2, 2});  // shape[:1] + [2 blocks]
  for (const auto& a : arrays) CHECK((a.name != "b4.zero_points" && a.name != "b8.zero_points"));
  CHECK(meta.size() == 4);

  // npz: the descriptions are 0-d string arrays instead.
  convert::StringMap none;
  const auto npz = convert::quantized_to_arrays(tensors, convert::TensorFormat::npz, none);
  CHECK(none.empty());
  const Tensor& d = named(npz, "b4.quantization");
  CHECK(d.dtype() == DType::utf8);
  CHECK(d.shape().empty());
  CHECK(std::string(d.string_at(0)) == meta.at("b4.quantization"));
}

TEST_CASE("quantized tensors round-trip through .npz and .safetensors files") {
  TempDir dir;
  const auto tensors = all();
  for (const char* file : {"q.npz", "q.safetensors"}) {
    CAPTURE(file);
    convert::write_tensor_file(dir / file, tensors);
    const convert::TensorFile back = convert::read_tensor_file(dir / file);
    CHECK(back.metadata.empty());  // the descriptions were consumed
    REQUIRE(back.tensors.size() == tensors.size());
    for (const auto& t : tensors) {
      CAPTURE(t.name);
      const Tensor& r = find_tensor(back.tensors, t.name);
      CHECK(r == t.tensor);
      if (t.tensor.quantization()) {
        REQUIRE(r.quantization());
        CHECK(*r.quantization() == *t.tensor.quantization());
        CHECK(r.dequantize() == t.tensor.dequantize());
      }
    }
  }
  // User metadata stays; a key that a description needs is refused.
  convert::write_tensor_file(dir / "m.safetensors", tensors, {{"format", "pt"}});
  CHECK(convert::read_tensor_file(dir / "m.safetensors").metadata ==
        convert::StringMap{{"format", "pt"}});
  expect_error(
      [&] {
        convert::write_tensor_file(dir / "m.safetensors", tensors, {{"pa.quantization", "x"}});
      },
      ErrorCode::invalid_argument, "describes quantized tensor 'pa'");
}

TEST_CASE("npy and BTF cannot hold quantized tensors; names may not collide") {
  TempDir dir;
  const std::vector<NamedTensor> one = {block_int4()};
  expect_error([&] { convert::write_tensor_file(dir / "q.npy", one); }, ErrorCode::unsupported,
               "cannot hold quantized tensor 'b4'");
  expect_error([&] { convert::write_tensor_file(dir / "q.btf", one); }, ErrorCode::unsupported,
               "BTF has neither names nor metadata");
  CHECK(!std::filesystem::exists(dir / "q.npy"));
  std::vector<NamedTensor> clash = {block_int8(),
                                    {"b8.scales", dense<float>(DType::float32, {1}, {1})}};
  expect_error([&] { convert::write_tensor_file(dir / "c.npz", clash); },
               ErrorCode::invalid_argument, "'b8.scales' is used twice");
}

TEST_CASE("arrays_to_quantized refuses hostile arrays, naming the array") {
  auto file_of =
      [](const std::function<void(std::vector<NamedTensor>&, convert::StringMap&)>& change) {
        convert::TensorFile f;
        f.format = convert::TensorFormat::safetensors;
        const auto tensors = all();
        f.tensors = convert::quantized_to_arrays(tensors, f.format, f.metadata);
        change(f.tensors, f.metadata);
        return f;
      };
  auto set = [](std::vector<NamedTensor>& v, const std::string& name, Tensor t) {
    for (auto& nt : v)
      if (nt.name == name) nt.tensor = std::move(t);
  };
  auto refused =
      [&](const std::function<void(std::vector<NamedTensor>&, convert::StringMap&)>& change,
          ErrorCode code, const std::string& entry, const std::string& part) {
        convert::TensorFile f = file_of(change);
        try {
          convert::arrays_to_quantized(f);
          FAIL("accepted");
        } catch (const Error& e) {
          INFO(e.what());
          CHECK(e.code() == code);
          CHECK(e.context().entry == entry);
          CHECK(std::string(e.what()).find(part) != std::string::npos);
        }
      };
  // The unchanged file joins back.
  convert::TensorFile ok = file_of([](auto&, auto&) {});
  convert::arrays_to_quantized(ok);
  CHECK(ok.tensors.size() == 5);

  refused(
      [&](auto& v, auto&) {
        set(v, "b4", dense<std::int8_t>(DType::int8, {3, 3}, {0, 0, 0, 0, 0, 0, 0, 0, 8}));
      },
      ErrorCode::corrupt, "b4", "'b4'[8] is 8, outside the int4 range");
  refused(
      [&](auto& v, auto&) {
        set(v, "pt", dense<std::int8_t>(DType::int8, {3}, {0, 0, 0}));
      },
      ErrorCode::corrupt, "pt", "has dtype int8, expected uint8");
  refused([&](auto& v, auto&) { set(v, "pt.scales", dense<double>(DType::float64, {}, {0.0})); },
          ErrorCode::corrupt, "pt.scales", "quantization.scale 0 is not positive");
  refused(
      [&](auto& v, auto&) {
        set(v, "pa.zero_points", dense<std::int64_t>(DType::int64, {3}, {0, 128, 0}));
      },
      ErrorCode::corrupt, "pa.zero_points", "quantization.zero_points[1] 128 is outside");
  refused(
      [&](auto& v, auto&) {
        set(v, "pa.scales", dense<float>(DType::float32, {3}, {1, 1, 1}));
      },
      ErrorCode::corrupt, "pa.scales", "expected float64");
  refused(
      [&](auto& v, auto&) {
        set(v, "b8.scales", dense<float>(DType::float32, {4}, {1, 1, 1, 1}));
      },
      ErrorCode::corrupt, "b8.scales", "has shape [4], expected [2, 2]");
  refused(
      [&](auto& v, auto&) {
        set(v, "b8.scales", dense<std::uint16_t>(DType::float16, {2, 2}, {0x3C00, 0x7C00, 1, 1}));
      },
      ErrorCode::corrupt, "b8.scales", "quantization.scales[1] inf");
  refused(
      [&](auto& v, auto&) {
        v.push_back({"b8.zero_points", dense<std::int64_t>(DType::int64, {2, 2}, {0, 0, 0, 0})});
      },
      ErrorCode::corrupt, "b8.zero_points", "not allowed");
  refused([&](auto&, auto& m) { m["b8.quantization"] = R"({"version":1,"version":1})"; },
          ErrorCode::corrupt, "b8.quantization", "duplicate key 'version'");
  refused(
      [&](auto&, auto& m) { m["b8.quantization"] = R"({"version":1,"scheme":"block-symmetric"})"; },
      ErrorCode::corrupt, "b8.quantization", "are required");
  refused(
      [&](auto&, auto& m) {
        m["pt.quantization"] =
            R"({"version":1,"scheme":"affine-per-tensor","storage":"uint8","bits":8,"axis":0,"dtype":"bfloat16"})";
      },
      ErrorCode::corrupt, "pt.quantization", "\"axis\" is not allowed");
  refused(
      [&](auto&, auto& m) {
        m["pt.quantization"] =
            R"({"version":1,"scheme":"affine-per-tensor","storage":"uint4","bits":4,"dtype":"bfloat16"})";
      },
      ErrorCode::unsupported, "pt.quantization", "unknown storage 'uint4'");
  refused(
      [&](auto&, auto& m) {
        m["pt.quantization"] =
            R"({"version":1,"scheme":"affine-per-tensor","storage":"uint8","bits":8,"dtype":"int32"})";
      },
      ErrorCode::corrupt, "pt.quantization", "stands for float16, bfloat16, float32 or float64");
  refused(
      [&](auto& v, auto&) {
        std::erase_if(v, [](const NamedTensor& t) { return t.name == "pa.zero_points"; });
      },
      ErrorCode::corrupt, "pa.quantization", "'pa.zero_points' is missing");
  refused([&](auto& v,
              auto&) { std::erase_if(v, [](const NamedTensor& t) { return t.name == "pa"; }); },
          ErrorCode::corrupt, "pa.quantization", "'pa' is missing");
}
