// Every writer, read back by our readers: same dtype, shape and bytes; the
// safetensors writer byte for byte against the safetensors library's own
// test vectors; format limits give clear errors; file writes are atomic.
#include <fstream>
#include <sstream>

#include "convert_test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;
using convert::NamedTensor;

namespace {

std::uint16_t bits(float f) {  // bfloat16 bits of an exactly representable float
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<std::uint16_t>(u >> 16);
}

// The three tensors read from the safetensors `file` are written back to
// its very bytes, also when given in another order (the writer sorts them).
void check_written_back_in_any_order(const std::vector<NamedTensor>& tensors,
                                     const std::string& file) {
  std::ostringstream out;
  convert::write_safetensors(out, tensors);
  CHECK(out.str() == file);
  std::vector<NamedTensor> shuffled = {tensors[2], tensors[1], tensors[0]};
  std::ostringstream again;
  convert::write_safetensors(again, shuffled);
  CHECK(again.str() == file);
}

// One tensor of every fixed-size dtype, plus scalar and empty ones.
std::vector<NamedTensor> numeric_tensors() {
  std::vector<NamedTensor> t;
  t.push_back({"bool", dense<std::uint8_t>(DType::bool_, {2, 2}, {1, 0, 0, 1})});
  t.push_back({"i8", dense<std::int8_t>(DType::int8, {3}, {-128, 0, 127})});
  t.push_back({"u8", dense<std::uint8_t>(DType::uint8, {3}, {0, 128, 255})});
  t.push_back({"i16", dense<std::int16_t>(DType::int16, {2}, {-32768, 32767})});
  t.push_back({"u16", dense<std::uint16_t>(DType::uint16, {2}, {0, 65535})});
  t.push_back({"i32", dense<std::int32_t>(DType::int32, {1, 2}, {-5, 1 << 30})});
  t.push_back({"u32", dense<std::uint32_t>(DType::uint32, {2}, {7, 4000000000u})});
  t.push_back({"i64", dense<std::int64_t>(DType::int64, {3}, {5, -6, 7})});
  t.push_back({"u64", dense<std::uint64_t>(DType::uint64, {1}, {18446744073709551615ull})});
  t.push_back({"f16", dense<std::uint16_t>(DType::float16, {2}, {0x3C00, 0xB400})});
  t.push_back({"f32", dense<float>(DType::float32, {2, 3}, {1.5f, -2, 3.25f, 4, -0.5f, 100})});
  t.push_back({"f64", dense<double>(DType::float64, {}, {2.5})});
  t.push_back({"bf16", dense<std::uint16_t>(DType::bfloat16, {2}, {bits(1.0f), bits(-2.0f)})});
  // e4m3fn 1.0, -448, NaN; e5m2 1.0, +inf (FORMAT.md section 6).
  t.push_back({"e4m3", dense<std::uint8_t>(DType::float8_e4m3fn, {3}, {0x38, 0xFE, 0x7F})});
  t.push_back({"e5m2", dense<std::uint8_t>(DType::float8_e5m2, {1, 2}, {0x3C, 0x7C})});
  // e8m0fnu 1.0, 2.0, 2^-127, NaN; e2m1 pairs (low nibble first): (0.5, 1), (6, -0.5), (0, 6),
  // (-0, -6).
  t.push_back({"e8m0", dense<std::uint8_t>(DType::float8_e8m0fnu, {4}, {0x7F, 0x80, 0x00, 0xFF})});
  t.push_back(
      {"fp4", dense<std::uint8_t>(DType::float4_e2m1fn_x2, {2, 2}, {0x21, 0x97, 0x70, 0xF8})});
  t.push_back({"empty", dense<float>(DType::float32, {0, 4}, {})});
  return t;
}

Tensor strings_tensor() {
  std::vector<std::string> s = {"alpha",
                                "\xCE\xB2"
                                "eta",
                                "", "\xF0\x9F\x98\x80 x"};
  return Tensor::strings({2, 2}, s);
}

Tensor coo_tensor() {
  return Tensor::sparse_coo(DType::float32, {3, 4}, 2, bytes_of_values<std::int64_t>({0, 1, 2, 3}),
                            bytes_of_values<float>({1.5f, -2.5f}));
}

void check_same(const std::vector<NamedTensor>& expected, const std::vector<NamedTensor>& got) {
  REQUIRE(got.size() == expected.size());
  for (const auto& e : expected) {
    INFO("tensor " << e.name);
    const Tensor& g = find_tensor(got, e.name);
    if (e.tensor.dtype() == DType::bfloat16 && g.dtype() == DType::uint16) {
      // npy stores bfloat16 as raw '<u2'.
      CHECK(g.shape() == e.tensor.shape());
      CHECK(values_of<std::uint16_t>(g) == values_of<std::uint16_t>(e.tensor));
    } else if ((e.tensor.dtype() == DType::float8_e4m3fn ||
                e.tensor.dtype() == DType::float8_e5m2 ||
                e.tensor.dtype() == DType::float8_e8m0fnu ||
                e.tensor.dtype() == DType::float4_e2m1fn_x2) &&
               g.dtype() == DType::uint8) {
      // npy stores the 8-bit floats and the FP4 pairs as raw '|u1' (pairs: one byte each).
      CHECK(g.shape() == e.tensor.shape());
      CHECK(g.values().as_string_view() == e.tensor.values().as_string_view());
    } else {
      CHECK(g == e.tensor);
    }
  }
}

std::string dir_listing(const std::filesystem::path& dir) {
  std::string s;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    s += e.path().filename().string() + ";";
  return s;
}

}  // namespace

TEST_SUITE("convert") {
  TEST_CASE("npy: stream round trip of every dtype, strings and rank 0") {
    auto tensors = numeric_tensors();
    tensors.push_back({"strings", strings_tensor()});
    for (const auto& t : tensors) {
      INFO("tensor " << t.name);
      std::ostringstream out;
      convert::write_npy(out, t.tensor);
      const std::string s = out.str();
      CHECK(s.substr(0, 6) == "\x93NUMPY");
      auto back = convert::read_npy(Bytes::copy_of(s), t.name);
      check_same({t}, back);
    }
  }

  TEST_CASE("npy: header layout as numpy writes it") {
    std::ostringstream out;
    convert::write_npy(out, dense<float>(DType::float32, {2, 3}, {1, 2, 3, 4, 5, 6}));
    const std::string s = out.str();
    REQUIRE(s.size() == 128 + 24);
    CHECK(s[6] == 1);
    CHECK(s[7] == 0);
    CHECK(static_cast<unsigned char>(s[8]) == 118);  // header length 118, little-endian
    CHECK(s[9] == 0);
    CHECK(s.substr(10, 59) == "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
    CHECK(s[127] == '\n');
    CHECK(s.find_first_not_of(' ', 69) == 127);
    std::ostringstream one;
    convert::write_npy(one, dense<std::int64_t>(DType::int64, {1}, {1}));
    CHECK(one.str().find("'shape': (1,), }") != std::string::npos);
    std::ostringstream scalar;
    convert::write_npy(scalar, dense<double>(DType::float64, {}, {1}));
    CHECK(scalar.str().find("'descr': '<f8', 'fortran_order': False, 'shape': (), }") !=
          std::string::npos);
    std::ostringstream text;
    convert::write_npy(text, strings_tensor());
    CHECK(text.str().find("'descr': '<U5'") != std::string::npos);  // longest: 5 code points
  }

  TEST_CASE("npz: file round trip, data 64-byte aligned and zero-copy when mapped") {
    TempDir dir;
    auto tensors = numeric_tensors();
    tensors.push_back({"strings", strings_tensor()});
    tensors.push_back({"nested/name", dense<float>(DType::float32, {1}, {9})});
    convert::write_npz(dir / "all.npz", tensors);
    CHECK(dir_listing(dir.path()) == "all.npz;");
    Bytes file = io::map_file(dir / "all.npz");
    auto back = convert::read_npz(file);
    check_same(tensors, back);
    const Tensor& f32 = find_tensor(back, "f32");
    CHECK(f32.values().data() >= file.data());
    CHECK(f32.values().data() < file.data() + file.size());  // a view, not a copy
    CHECK((f32.values().data() - file.data()) % 64 == 0);
  }

  TEST_CASE("npz: empty archive round trip") {
    TempDir dir;
    convert::write_npz(dir / "empty.npz", {});
    CHECK(io::read_file(dir / "empty.npz").size() == 22);
    CHECK(convert::read_npz(io::read_file(dir / "empty.npz")).empty());
  }

  TEST_CASE("safetensors: stream and file round trip with metadata") {
    auto tensors = numeric_tensors();
    convert::StringMap meta{{"format", "pt"}, {"quote\"", "line\nbreak \xC3\xA9"}};
    std::ostringstream out;
    convert::write_safetensors(out, tensors, meta);
    auto back = convert::read_safetensors(Bytes::copy_of(out.str()));
    check_same(tensors, back.tensors);
    CHECK(back.metadata == meta);
    // Data order: descending alignment, then name.
    std::vector<std::string> names;
    for (const auto& t : back.tensors) names.push_back(t.name);
    CHECK(names == std::vector<std::string>{"u64", "i64", "f64", "empty", "f32", "u32", "i32",
                                            "bf16", "f16", "u16", "i16", "e8m0", "e4m3", "e5m2",
                                            "i8", "u8", "fp4", "bool"});
    TempDir dir;
    convert::write_safetensors(dir / "m.safetensors", tensors, meta);
    CHECK(io::read_file(dir / "m.safetensors").as_string_view() == out.str());
    Bytes mapped = io::map_file(dir / "m.safetensors");
    auto again = convert::read_safetensors(mapped);
    // Every tensor is aligned for its type, so all are views into the mapping.
    for (const auto& t : again.tensors)
      if (t.tensor.values().size() > 0) CHECK(t.tensor.values().is_mapped());
  }

  TEST_CASE("safetensors: byte-identical to the safetensors library's test vectors") {
    // safetensors/src/tensor.rs test_serialization: "attn.0" F32 [1,2,3] 0..5.
    std::vector<NamedTensor> t = {
        {"attn.0", dense<float>(DType::float32, {1, 2, 3}, {0, 1, 2, 3, 4, 5})}};
    std::ostringstream out;
    convert::write_safetensors(out, t);
    std::string expected("\x40\0\0\0\0\0\0\0", 8);
    expected += R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
    expected +=
        std::string("\0\0\0\0\0\0\x80\x3f\0\0\0\x40\0\0\x40\x40\0\0\x80\x40\0\0\xa0\x40", 24);
    CHECK(out.str() == expected);
    // test_serialization_forced_alignement: "attn0" [1,1,2,3] needs 7 spaces.
    std::ostringstream aligned;
    convert::write_safetensors(
        aligned, std::vector<NamedTensor>{
                     {"attn0", dense<float>(DType::float32, {1, 1, 2, 3}, {0, 1, 2, 3, 4, 5})}});
    CHECK(aligned.str().substr(0, 80) ==
          std::string("\x48\0\0\0\0\0\0\0", 8) +
              R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       )");
    // test_empty: no tensors, without and with metadata.
    std::ostringstream empty;
    convert::write_safetensors(empty, {});
    CHECK(empty.str() == std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
    std::ostringstream meta;
    convert::write_safetensors(meta, {}, {{"framework", "pt"}});
    CHECK(meta.str() ==
          std::string("\x28\0\0\0\0\0\0\0", 8) + R"({"__metadata__":{"framework":"pt"}}     )");
  }

  TEST_CASE(
      "safetensors: F8_E4M3 and F8_E5M2 files read as the float8 types, written back byte "
      "for byte") {
    // Written by hand as the library writes: compact JSON, tensors by
    // descending dtype (F8_E4M3 after F8_E5M2 in its enum), header padded
    // with spaces to a multiple of 8 bytes.
    std::string json = R"({"a":{"dtype":"F8_E4M3","shape":[2,2],"data_offsets":[0,4]},)"
                       R"("b":{"dtype":"F8_E5M2","shape":[3],"data_offsets":[4,7]}})";
    json.append((8 - json.size() % 8) % 8, ' ');
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((json.size() >> (8 * i)) & 0xFF);
    // e4m3fn 1.0, -448, 2^-9, NaN; e5m2 1.0, +inf, -3 * 2^-16.
    const std::string a = "\x38\xFE\x01\x7F", b = "\x3C\x7C\x83";
    file += json + a + b;
    auto f = convert::read_safetensors(Bytes::copy_of(file));
    REQUIRE(f.tensors.size() == 2);
    CHECK(f.tensors[0].name == "a");
    CHECK(f.tensors[0].tensor.dtype() == DType::float8_e4m3fn);
    CHECK(f.tensors[0].tensor.shape() == Shape{2, 2});
    CHECK(f.tensors[0].tensor.values().as_string_view() == a);
    CHECK(f.tensors[1].tensor.dtype() == DType::float8_e5m2);
    CHECK(f.tensors[1].tensor.shape() == Shape{3});
    CHECK(f.tensors[1].tensor.values().as_string_view() == b);
    std::ostringstream out;
    convert::write_safetensors(out, f.tensors);
    CHECK(out.str() == file);
  }

  TEST_CASE(
      "safetensors: F8_E8M0 and F4 read as float8_e8m0fnu and float4_e2m1fn_x2 (F4's last "
      "dimension halved into pairs), written back byte for byte") {
    // By hand as the library writes: descending dtype (F8_E8M0, then U8,
    // then F4 in its enum), then name; compact JSON padded to 8 bytes. F4's
    // shape counts 4-bit values: [2, 4] is 8 values in 4 bytes.
    std::string json = R"({"s":{"dtype":"F8_E8M0","shape":[3],"data_offsets":[0,3]},)"
                       R"("u":{"dtype":"U8","shape":[1],"data_offsets":[3,4]},)"
                       R"("w":{"dtype":"F4","shape":[2,4],"data_offsets":[4,8]}})";
    json.append((8 - json.size() % 8) % 8, ' ');
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((json.size() >> (8 * i)) & 0xFF);
    // s: 2^0, 2^1, NaN. w: rows (0.5, 1, 6, -0.5) and (0, 6, -0, -6), each
    // byte's first value in its low nibble (0x1 = 0.5, 0x2 = 1, 0x7 = 6,
    // 0x9 = -0.5, 0x8 = -0, 0xF = -6).
    const std::string s = "\x7F\x80\xFF", u = "\x05", w = "\x21\x97\x70\xF8";
    file += json + s + u + w;
    auto f = convert::read_safetensors(Bytes::copy_of(file));
    REQUIRE(f.tensors.size() == 3);
    CHECK(f.tensors[0].name == "s");
    CHECK(f.tensors[0].tensor.dtype() == DType::float8_e8m0fnu);
    CHECK(f.tensors[0].tensor.shape() == Shape{3});
    CHECK(f.tensors[0].tensor.values().as_string_view() == s);
    CHECK(f.tensors[2].name == "w");
    CHECK(f.tensors[2].tensor.dtype() == DType::float4_e2m1fn_x2);
    CHECK(f.tensors[2].tensor.shape() == Shape{2, 2});  // pairs, as torch loads F4
    CHECK(f.tensors[2].tensor.numel() == 4);
    CHECK(f.tensors[2].tensor.values().as_string_view() == w);
    check_written_back_in_any_order(f.tensors, file);
    // Through a file too: read_tensor_file and write_tensor_file agree.
    TempDir dir;
    std::ofstream(dir / "mx.safetensors", std::ios::binary) << file;
    auto back = convert::read_tensor_file(dir / "mx.safetensors");
    convert::write_safetensors(dir / "again.safetensors", back.tensors);
    CHECK(io::read_file(dir / "again.safetensors").as_string_view() == file);
  }

  TEST_CASE("safetensors: a float4_e2m1fn_x2 scalar is refused, naming the tensor") {
    std::vector<NamedTensor> t = {
        {"pair", dense<std::uint8_t>(DType::float4_e2m1fn_x2, {}, {0x21})}};
    std::ostringstream out;
    try {
      convert::write_safetensors(out, t);
      FAIL("wrote a scalar float4_e2m1fn_x2 to safetensors");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::unsupported);
      const std::string what = e.what();
      CHECK(what.find("'pair'") != std::string::npos);
      CHECK(what.find("reshape it to [1]") != std::string::npos);
    }
    // Reshaped to [1], it is F4 [2].
    t[0].tensor = dense<std::uint8_t>(DType::float4_e2m1fn_x2, {1}, {0x21});
    std::ostringstream ok;
    convert::write_safetensors(ok, t);
    CHECK(ok.str().find(R"("pair":{"dtype":"F4","shape":[2],"data_offsets":[0,1]})") !=
          std::string::npos);
  }

  TEST_CASE("safetensors: an F4 tensor of an odd last dimension names the file and the tensor") {
    std::string json = R"({"w":{"dtype":"F4","shape":[2,3],"data_offsets":[0,3]}})";
    json.append((8 - json.size() % 8) % 8, ' ');
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((json.size() >> (8 * i)) & 0xFF);
    file += json + "xyz";
    TempDir dir;
    std::ofstream(dir / "odd.safetensors", std::ios::binary) << file;
    try {
      convert::read_tensor_file(dir / "odd.safetensors");
      FAIL("read an F4 tensor of an odd last dimension");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::unsupported);
      const std::string what = e.what();
      CHECK(e.context().archive.find("odd.safetensors") != std::string::npos);
      CHECK(what.find("tensor 'w' of dtype F4 has shape [2, 3], an odd last dimension") !=
            std::string::npos);
    }
  }

  TEST_CASE("npy and npz: complex64 and complex128 round trip as '<c8' and '<c16'") {
    // [1 + 2i, -0.5 + 0i] and [3 - 4i]: interleaved real and imaginary parts.
    std::vector<NamedTensor> t = {{"c64", dense<float>(DType::complex64, {2}, {1, 2, -0.5f, 0})},
                                  {"c128", dense<double>(DType::complex128, {1, 1}, {3, -4})}};
    for (const auto& n : t) {
      INFO(n.name);
      std::ostringstream out;
      convert::write_npy(out, n.tensor);
      const std::string descr = n.name == "c64" ? "'descr': '<c8'" : "'descr': '<c16'";
      CHECK(out.str().find(descr) != std::string::npos);
      check_same({n}, convert::read_npy(Bytes::copy_of(out.str()), n.name));
    }
    TempDir dir;
    convert::write_npz(dir / "c.npz", t);
    check_same(t, convert::read_npz(io::read_file(dir / "c.npz")));
  }

  TEST_CASE("safetensors: C64 reads as complex64 and is written back byte for byte") {
    // By hand as the library writes: descending dtype (F64, then C64, then
    // F32 in its enum), then name; compact JSON padded to 8 bytes.
    std::string json = R"({"b":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},)"
                       R"("a":{"dtype":"C64","shape":[2],"data_offsets":[8,24]},)"
                       R"("c":{"dtype":"F32","shape":[1],"data_offsets":[24,28]}})";
    json.append((8 - json.size() % 8) % 8, ' ');
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((json.size() >> (8 * i)) & 0xFF);
    // b = 2.0; a = [1 + 2i, -0.5 + 0i]; c = 1.0.
    const std::string b("\0\0\0\0\0\0\x00\x40", 8);
    const std::string a("\x00\x00\x80\x3F\x00\x00\x00\x40\x00\x00\x00\xBF\x00\x00\x00\x00", 16);
    const std::string c("\x00\x00\x80\x3F", 4);
    file += json + b + a + c;
    auto f = convert::read_safetensors(Bytes::copy_of(file));
    REQUIRE(f.tensors.size() == 3);
    CHECK(f.tensors[1].name == "a");
    const Tensor& z = f.tensors[1].tensor;
    CHECK(z.dtype() == DType::complex64);
    CHECK(z.shape() == Shape{2});
    CHECK(values_of<float>(z) == std::vector<float>{1, 2, -0.5f, 0});
    check_written_back_in_any_order(f.tensors, file);
  }

  TEST_CASE("btf: stream and file round trip, dense and COO, order kept") {
    std::vector<NamedTensor> tensors;
    for (auto& t : numeric_tensors()) {
      const DType d = t.tensor.dtype();
      if (d != DType::bool_ && d != DType::float16 && d != DType::bfloat16 &&
          d != DType::float8_e4m3fn && d != DType::float8_e5m2 && d != DType::float8_e8m0fnu &&
          d != DType::float4_e2m1fn_x2)
        tensors.push_back(t);
    }
    tensors.push_back({"coo", coo_tensor()});
    tensors.push_back({"coo_empty", Tensor::sparse_coo(DType::int32, {5}, 0, Bytes(), Bytes())});
    std::ostringstream out;
    convert::write_btf(out, tensors);
    CHECK(out.str().size() % 8 == 0);
    auto back = convert::read_btf(Bytes::copy_of(out.str()));
    REQUIRE(back.size() == tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      INFO("tensor " << tensors[i].name);
      CHECK(back[i].name == std::to_string(i));
      CHECK(back[i].tensor == tensors[i].tensor);
    }
    TempDir dir;
    convert::write_btf(dir / "t.btf", tensors);
    CHECK(io::read_file(dir / "t.btf").as_string_view() == out.str());
  }

  TEST_CASE("btf: the record layout of TFRT's writer, byte for byte") {
    std::ostringstream out;
    convert::write_btf(
        out, std::vector<NamedTensor>{{"a", dense<std::uint16_t>(DType::uint16, {3}, {1, 2, 3})}});
    const std::string expected = std::string(
        "\x01\0\0\0\0\0\0\0"  // num_tensors
        "\x10\0\0\0\0\0\0\0"  // offset of record 0
        "\x01\0\0\0\0\0\0\0"  // rank
        "\x07\0\0\0\0\0\0\0"  // dtype u16 = 7, layout RMD = 0, reserved
        "\x03\0\0\0\0\0\0\0"  // dims
        "\x01\0\x02\0\x03\0"  // data
        "\0\0",               // padding to 8
        48);
    CHECK(out.str() == expected);
  }

  TEST_CASE("write_tensor_file dispatches by extension") {
    TempDir dir;
    auto tensors = numeric_tensors();
    std::vector<NamedTensor> one = {tensors[10]};
    convert::write_tensor_file(dir / "f32.npy", one);
    auto npy = convert::read_tensor_file(dir / "f32.npy");
    CHECK(npy.tensors[0].name == "f32");
    CHECK(npy.tensors[0].tensor == one[0].tensor);
    convert::write_tensor_file(dir / "m.safetensors", one, {{"k", "v"}});
    CHECK(convert::read_tensor_file(dir / "m.safetensors").metadata.at("k") == "v");
    convert::write_tensor_file(dir / "m.npz", one);
    CHECK(convert::read_tensor_file(dir / "m.npz").tensors[0].tensor == one[0].tensor);
    convert::write_tensor_file(dir / "m.btf", one);
    CHECK(convert::read_tensor_file(dir / "m.btf").tensors[0].tensor == one[0].tensor);
    expect_error([&] { convert::write_tensor_file(dir / "two.npy", tensors); },
                 ErrorCode::invalid_argument, "exactly one");
    expect_error(
        [&] {
          convert::write_tensor_file(dir / "m.npz", one, {{"k", "v"}});
        },
        ErrorCode::unsupported, "metadata");
    expect_error([&] { convert::write_tensor_file(dir / "m.h5", one); }, ErrorCode::unsupported);
  }

  TEST_CASE("tensors a format cannot hold: Error(unsupported) naming the tensor") {
    std::ostringstream out;
    expect_error([&] { convert::write_npy(out, coo_tensor()); }, ErrorCode::unsupported, "COO");
    TempDir dir;
    std::vector<NamedTensor> coo = {{"sparse_w", coo_tensor()}};
    expect_error([&] { convert::write_npz(dir / "x.npz", coo); }, ErrorCode::unsupported,
                 "sparse_w");
    std::vector<NamedTensor> text = {{"vocab", strings_tensor()}};
    expect_error([&] { convert::write_safetensors(out, text); }, ErrorCode::unsupported, "vocab");
    expect_error([&] { convert::write_safetensors(out, coo); }, ErrorCode::unsupported, "sparse_w");
    expect_error([&] { convert::write_btf(out, text); }, ErrorCode::unsupported, "vocab");
    std::vector<NamedTensor> half = {{"h", dense<std::uint16_t>(DType::float16, {1}, {0})}};
    expect_error([&] { convert::write_btf(out, half); }, ErrorCode::unsupported, "'h'");
    std::vector<NamedTensor> fp8 = {{"f8", dense<std::uint8_t>(DType::float8_e4m3fn, {1}, {0x38})}};
    expect_error([&] { convert::write_btf(out, fp8); }, ErrorCode::unsupported,
                 "dtype float8_e4m3fn has no BTF number");
    std::vector<NamedTensor> complex = {
        {"spectral.weight", dense<float>(DType::complex64, {1}, {1, 2})}};
    expect_error([&] { convert::write_btf(out, complex); }, ErrorCode::unsupported,
                 "dtype complex64 has no BTF number");
    // safetensors has C64 but no complex128.
    std::vector<NamedTensor> wide = {
        {"ok", dense<float>(DType::float32, {1}, {1})},
        {"spectral.weight", dense<double>(DType::complex128, {1}, {1, 2})}};
    expect_error([&] { convert::write_safetensors(out, wide); }, ErrorCode::unsupported,
                 "'spectral.weight': complex128 tensors are not supported (safetensors has no such "
                 "dtype; C64 is complex64)");
    expect_error([&] { convert::write_safetensors(dir / "w.safetensors", wide); },
                 ErrorCode::unsupported, "spectral.weight");
    std::vector<NamedTensor> nul = {
        {"z", Tensor::strings({1}, std::vector<std::string>{std::string("a\0", 2)})}};
    expect_error([&] { convert::write_npz(dir / "z.npz", nul); }, ErrorCode::unsupported, "U+0000");
    CHECK(dir_listing(dir.path()).empty());
  }

  TEST_CASE("invalid names: duplicates, reserved, unsafe member names") {
    auto t = dense<float>(DType::float32, {1}, {1});
    std::vector<NamedTensor> dup = {{"a", t}, {"b", t}, {"a", t}};
    std::ostringstream out;
    TempDir dir;
    expect_error([&] { convert::write_safetensors(out, dup); }, ErrorCode::invalid_argument, "'a'");
    expect_error([&] { convert::write_npz(dir / "d.npz", dup); }, ErrorCode::invalid_argument,
                 "'a'");
    std::vector<NamedTensor> reserved = {{"__metadata__", t}};
    expect_error([&] { convert::write_safetensors(out, reserved); }, ErrorCode::invalid_argument,
                 "reserved");
    std::vector<NamedTensor> escape = {{"../up", t}};
    expect_error([&] { convert::write_npz(dir / "e.npz", escape); }, ErrorCode::invalid_argument,
                 "../up");
  }

  TEST_CASE("file writes are atomic: a failed write leaves the old file and no temporary") {
    TempDir dir;
    const auto path = dir / "m.safetensors";
    std::vector<NamedTensor> good = {{"w", dense<float>(DType::float32, {1}, {1})}};
    convert::write_safetensors(path, good);
    const std::string before(io::read_file(path).as_string_view());
    std::vector<NamedTensor> bad = {{"w", dense<float>(DType::float32, {1}, {2})},
                                    {"s", strings_tensor()}};
    expect_error([&] { convert::write_safetensors(path, bad); }, ErrorCode::unsupported);
    expect_error([&] { convert::write_tensor_file(dir / "x.npy", bad); },
                 ErrorCode::invalid_argument);
    CHECK(io::read_file(path).as_string_view() == before);
    CHECK(dir_listing(dir.path()) == "m.safetensors;");
    // A folder that does not exist: Error(io) naming the target.
    expect_error([&] { convert::write_btf(dir / "no" / "t.btf", good); }, ErrorCode::io, "t.btf");
    expect_error([&] { convert::write_npz(dir / "no" / "t.npz", good); }, ErrorCode::io);
    // Overwriting replaces the whole file.
    convert::write_safetensors(
        path, std::vector<NamedTensor>{{"w", good[0].tensor}, {"v", good[0].tensor}});
    CHECK(convert::read_safetensors(io::read_file(path)).tensors.size() == 2);
  }
}
