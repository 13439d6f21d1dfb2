// Reads the reference files written by numpy / by hand-written Python
// (tests/golden/convert/make_golden.py) and checks every value against the
// values stated by hand below (the generator prints the same values).
#include <cmath>
#include <limits>

#include "convert_test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;
using convert::NamedTensor;

namespace {

Tensor npy(const std::string& name) {
  auto t = convert::read_npy(golden_bytes(name), "x");
  REQUIRE(t.size() == 1);
  CHECK(t[0].name == "x");
  return t[0].tensor;
}

}  // namespace

TEST_SUITE("convert") {
  TEST_CASE("npy golden: float32 C order is a zero-copy view of the mapped file") {
    Bytes file = golden_bytes("f4.npy");
    auto t = convert::read_npy(file, "f4")[0].tensor;
    CHECK(t.dtype() == DType::float32);
    CHECK(t.shape() == Shape{2, 3});
    CHECK(values_of<float>(t) == std::vector<float>{1.5f, -2.0f, 3.25f, 4.0f, -0.5f, 100.0f});
    // numpy pads the header to 64 bytes: the data starts at 128, aligned.
    CHECK(t.values().data() == file.data() + 128);
    CHECK(t.values().is_mapped());
    CHECK(t.as<float>()[5] == 100.0f);
  }

  TEST_CASE("npy golden: big-endian data is byte-swapped") {
    CHECK(values_of<std::int32_t>(npy("i4_big_endian.npy")) ==
          std::vector<std::int32_t>{1, -2, 65536, 2147483647});
    CHECK(values_of<std::uint16_t>(npy("u2_big_endian.npy")) ==
          std::vector<std::uint16_t>{1, 65535});
    CHECK(values_of<std::uint64_t>(npy("u8_big_endian.npy")) ==
          std::vector<std::uint64_t>{18446744073709551615ull, 1});
    CHECK(values_of<double>(npy("f8_big_endian.npy")) == std::vector<double>{-1.25, 1e300});
    CHECK(npy("i4_big_endian.npy").dtype() == DType::int32);
  }

  TEST_CASE("npy golden: complex64 and complex128, big-endian parts swapped each on its own") {
    // np.array([[1 + 2j, -0.5 + 0j], [0 - 1j, 4 + 0.25j]], dtype="<c8"): a
    // zero-copy view of the file, the real part then the imaginary part.
    Bytes file = golden_bytes("c8.npy");
    Tensor c = convert::read_npy(file, "c")[0].tensor;
    CHECK(c.dtype() == DType::complex64);
    CHECK(c.shape() == Shape{2, 2});
    CHECK(values_of<float>(c) == std::vector<float>{1, 2, -0.5f, 0, 0, -1, 4, 0.25f});
    CHECK(c.values().is_mapped());
    // '>c8' [1 - 2j, 0.5j] and '>c16' [0.5 - 1j, -1.25 + 1e300j].
    Tensor b = npy("c8_big_endian.npy");
    CHECK(b.dtype() == DType::complex64);
    CHECK(b.shape() == Shape{2});
    CHECK(values_of<float>(b) == std::vector<float>{1, -2, 0, 0.5f});
    Tensor w = npy("c16_big_endian.npy");
    CHECK(w.dtype() == DType::complex128);
    CHECK(w.shape() == Shape{2});
    CHECK(values_of<double>(w) == std::vector<double>{0.5, -1, -1.25, 1e300});
  }

  TEST_CASE("npy golden: fortran_order=True is transposed into row-major") {
    Tensor f = npy("f8_fortran.npy");
    CHECK(f.dtype() == DType::float64);
    CHECK(f.shape() == Shape{2, 3});
    CHECK(values_of<double>(f) == std::vector<double>{0, 1, 2, 3, 4, 5});
    Tensor g = npy("i2_fortran_3d.npy");
    CHECK(g.shape() == Shape{2, 3, 4});
    std::vector<std::int16_t> expected(24);
    for (int i = 0; i < 24; ++i) expected[i] = static_cast<std::int16_t>(i);
    CHECK(values_of<std::int16_t>(g) == expected);
    // np.arange(6600).reshape(33, 5, 40) saved in Fortran order: row-major
    // values are 0, 1, 2, ... again.
    Tensor big = npy("i4_fortran_tiles.npy");
    CHECK(big.shape() == Shape{33, 5, 40});
    auto v = values_of<std::int32_t>(big);
    REQUIRE(v.size() == 6600);
    bool in_order = true;
    for (std::int32_t i = 0; i < 6600; ++i) in_order = in_order && v[i] == i;
    CHECK(in_order);
  }

  TEST_CASE("npy golden: every numeric dtype") {
    Tensor b = npy("bool.npy");
    CHECK(b.dtype() == DType::bool_);
    CHECK(values_of<std::uint8_t>(b) == std::vector<std::uint8_t>{1, 0, 1});
    Tensor h = npy("f2.npy");
    CHECK(h.dtype() == DType::float16);
    // 1.0, -2.5, 65504 as IEEE binary16 bit patterns.
    CHECK(values_of<std::uint16_t>(h) == std::vector<std::uint16_t>{0x3C00, 0xC100, 0x7BFF});
    CHECK(npy("u1.npy").dtype() == DType::uint8);
    CHECK(values_of<std::uint8_t>(npy("u1.npy")) == std::vector<std::uint8_t>{0, 255});
    CHECK(npy("u4.npy").dtype() == DType::uint32);
    CHECK(values_of<std::uint32_t>(npy("u4.npy")) == std::vector<std::uint32_t>{4000000000u});
    CHECK(npy("i1.npy").dtype() == DType::int8);
    CHECK(values_of<std::int8_t>(npy("i1.npy")) == std::vector<std::int8_t>{-128, 127});
    CHECK(npy("i8.npy").dtype() == DType::int64);
    CHECK(values_of<std::int64_t>(npy("i8.npy")) ==
          std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::min(),
                                    std::numeric_limits<std::int64_t>::max()});
    CHECK(npy("u2_big_endian.npy").dtype() == DType::uint16);
    CHECK(npy("u8_big_endian.npy").dtype() == DType::uint64);
  }

  TEST_CASE("npy golden: scalar, empty, versions 2.0 and 3.0") {
    Tensor s = npy("scalar.npy");
    CHECK(s.shape().empty());
    CHECK(values_of<double>(s) == std::vector<double>{3.5});
    Tensor e = npy("empty.npy");
    CHECK(e.dtype() == DType::float32);
    CHECK(e.shape() == Shape{0, 3});
    CHECK(e.values().size() == 0);
    CHECK(values_of<float>(npy("v2.npy")) == std::vector<float>{7.0f, 8.0f});
    CHECK(values_of<float>(npy("v3.npy")) == std::vector<float>{9.0f, 10.0f});
    CHECK(golden_bytes("v2.npy").data()[6] == std::byte{2});
    CHECK(golden_bytes("v3.npy").data()[6] == std::byte{3});
  }

  TEST_CASE("npy golden: unicode arrays become utf8 string tensors") {
    Tensor u = npy("unicode.npy");
    CHECK(u.dtype() == DType::utf8);
    CHECK(u.shape() == Shape{4});
    CHECK(strings_of(u) ==
          std::vector<std::string>{"a", "h\xC3\xA9llo", "", "\xE6\x97\xA5\xE6\x9C\xAC"});
    Tensor be = npy("unicode_big_endian.npy");
    CHECK(strings_of(be) == std::vector<std::string>{"xy", "\xF0\x9F\x98\x80"});
  }

  TEST_CASE("npy golden: bfloat16 bit patterns saved as <u2 read as uint16") {
    Tensor t = npy("bf16_as_u2.npy");
    CHECK(t.dtype() == DType::uint16);
    // bfloat16 1.0, -2.0, 0.5.
    CHECK(values_of<std::uint16_t>(t) == std::vector<std::uint16_t>{0x3F80, 0xC000, 0x3F00});
  }

  TEST_CASE("npy golden: object arrays are rejected clearly") {
    expect_error([] { npy("object.npy"); }, ErrorCode::unsupported, "object array");
  }

  TEST_CASE("npz golden: np.savez (stored members)") {
    auto t = convert::read_npz(golden_bytes("savez.npz"));
    REQUIRE(t.size() == 3);
    CHECK(t[0].name == "weights");
    CHECK(t[1].name == "bias");
    CHECK(t[2].name == "flags");
    CHECK(t[0].tensor.shape() == Shape{2, 2});
    CHECK(values_of<float>(t[0].tensor) == std::vector<float>{1, 2, 3, 4});
    CHECK(t[1].tensor.dtype() == DType::int64);
    CHECK(values_of<std::int64_t>(t[1].tensor) == std::vector<std::int64_t>{1, -2, 3});
    CHECK(t[2].tensor.dtype() == DType::bool_);
    CHECK(values_of<std::uint8_t>(t[2].tensor) == std::vector<std::uint8_t>{0, 1});
  }

  TEST_CASE("npz golden: np.savez_compressed (deflated members)") {
    auto t = convert::read_npz(golden_bytes("savez_compressed.npz"));
    REQUIRE(t.size() == 2);
    const Tensor& big = find_tensor(t, "big");
    CHECK(big.shape() == Shape{10000});
    auto v = values_of<float>(big);
    CHECK(v[0] == 1.0f);
    CHECK(v[9999] == -3.0f);
    int nonzero = 0;
    for (float x : v) nonzero += x != 0.0f;
    CHECK(nonzero == 2);
    CHECK(strings_of(find_tensor(t, "names")) == std::vector<std::string>{"alpha",
                                                                          "\xCE\xB2"
                                                                          "eta"});
  }

  TEST_CASE("safetensors golden: all dtypes, metadata, data order") {
    auto f = convert::read_safetensors(golden_bytes("model.safetensors"));
    CHECK(f.format == convert::TensorFormat::safetensors);
    CHECK(f.metadata == convert::StringMap{{"format", "pt"}, {"note", "caf\xC3\xA9 \"quoted\""}});
    REQUIRE(f.tensors.size() == 7);
    std::vector<std::string> names;
    for (const auto& t : f.tensors) names.push_back(t.name);
    CHECK(names ==
          std::vector<std::string>{"u64", "ids", "weight", "brain", "half", "bytes", "mask"});
    const Tensor& u64 = f.tensors[0].tensor;
    CHECK(u64.dtype() == DType::uint64);
    CHECK(u64.shape().empty());
    CHECK(values_of<std::uint64_t>(u64) == std::vector<std::uint64_t>{9223372036854775813ull});
    CHECK(values_of<std::int64_t>(f.tensors[1].tensor) == std::vector<std::int64_t>{5, -6, 7});
    const Tensor& w = f.tensors[2].tensor;
    CHECK(w.dtype() == DType::float32);
    CHECK(w.shape() == Shape{2, 2});
    CHECK(values_of<float>(w) == std::vector<float>{0.5f, -1.0f, 2.0f, 8.0f});
    CHECK(f.tensors[3].tensor.dtype() == DType::bfloat16);
    CHECK(values_of<std::uint16_t>(f.tensors[3].tensor) ==
          std::vector<std::uint16_t>{0x3F80, 0xC000, 0x3F00});
    CHECK(f.tensors[4].tensor.dtype() == DType::float16);
    CHECK(values_of<std::uint16_t>(f.tensors[4].tensor) ==
          std::vector<std::uint16_t>{0x3C00, 0xB400});  // 1.0, -0.25
    CHECK(f.tensors[5].tensor.dtype() == DType::uint8);
    CHECK(f.tensors[5].tensor.shape() == Shape{0});
    const Tensor& mask = f.tensors[6].tensor;
    CHECK(mask.dtype() == DType::bool_);
    CHECK(mask.shape() == Shape{2, 1});
    CHECK(values_of<std::uint8_t>(mask) == std::vector<std::uint8_t>{1, 0});
  }

  TEST_CASE("safetensors golden: unpadded header, misaligned data is copied") {
    Bytes file = golden_bytes("unpadded.safetensors");
    auto f = convert::read_safetensors(file);
    REQUIRE(f.tensors.size() == 3);
    CHECK(f.metadata.empty());
    CHECK(f.tensors[0].name == "a");
    CHECK(values_of<std::uint8_t>(f.tensors[0].tensor) == std::vector<std::uint8_t>{1, 2, 3});
    const Tensor& b = f.tensors[1].tensor;
    CHECK(b.as<float>()[1] == 2.0f);  // aligned copy: as<T> works
    CHECK(values_of<float>(b) == std::vector<float>{1.0f, 2.0f});
    CHECK(values_of<std::int16_t>(f.tensors[2].tensor) == std::vector<std::int16_t>{-300});
  }

  TEST_CASE("btf golden: dense records, scalar, COO, unpadded last record") {
    Bytes file = golden_bytes("tensors.btf");
    auto t = convert::read_btf(file);
    REQUIRE(t.size() == 5);
    for (std::size_t i = 0; i < t.size(); ++i) CHECK(t[i].name == std::to_string(i));
    CHECK(t[0].tensor.dtype() == DType::float32);
    CHECK(t[0].tensor.shape() == Shape{2, 3});
    CHECK(values_of<float>(t[0].tensor) == std::vector<float>{1, 2, 3, -4, 5.5f, 6});
    CHECK(t[0].tensor.values().data() == file.data() + 0x50);  // zero-copy
    CHECK(t[1].tensor.dtype() == DType::uint16);
    CHECK(values_of<std::uint16_t>(t[1].tensor) == std::vector<std::uint16_t>{1, 2, 65535});
    CHECK(t[2].tensor.dtype() == DType::int64);
    CHECK(t[2].tensor.shape().empty());
    CHECK(values_of<std::int64_t>(t[2].tensor) == std::vector<std::int64_t>{-42});
    const Tensor& coo = t[3].tensor;
    CHECK(coo.layout() == Layout::sparse_coo);
    CHECK(coo.dtype() == DType::float64);
    CHECK(coo.shape() == Shape{3, 4});
    CHECK(coo.nnz() == 2);
    CHECK(indices_of(coo) == std::vector<std::int64_t>{0, 1, 2, 3});
    CHECK(values_of<double>(coo) == std::vector<double>{1.5, -2.5});
    CHECK(t[4].tensor.dtype() == DType::int8);
    CHECK(values_of<std::int8_t>(t[4].tensor) == std::vector<std::int8_t>{-1, 0, 1});
  }

  TEST_CASE("read_tensor_file: dispatch by extension, npy named by stem, errors name the file") {
    auto f = convert::read_tensor_file(golden_convert("f4.npy"));
    CHECK(f.format == convert::TensorFormat::npy);
    REQUIRE(f.tensors.size() == 1);
    CHECK(f.tensors[0].name == "f4");
    CHECK(convert::read_tensor_file(golden_convert("savez.npz")).tensors.size() == 3);
    CHECK(convert::read_tensor_file(golden_convert("model.safetensors")).metadata.size() == 2);
    CHECK(convert::read_tensor_file(golden_convert("tensors.btf")).tensors.size() == 5);
    try {
      convert::read_tensor_file(golden_convert("object.npy"));
      FAIL("object.npy was accepted");
    } catch (const Error& e) {
      CHECK(e.context().archive.find("object.npy") != std::string::npos);
    }
    expect_error([] { convert::read_tensor_file(golden_convert("make_golden.py")); },
                 ErrorCode::unsupported, ".py");
    expect_error([] { convert::read_tensor_file(golden_convert("missing.npy")); }, ErrorCode::io);
  }

  TEST_CASE("tensor_format_for_extension: nullopt for an unknown extension, as for embeddings") {
    CHECK(convert::tensor_format_for_extension("a/b.NPY") == convert::TensorFormat::npy);
    CHECK(convert::tensor_format_for_extension("x.npz") == convert::TensorFormat::npz);
    CHECK(convert::tensor_format_for_extension("m.SafeTensors") ==
          convert::TensorFormat::safetensors);
    CHECK(convert::tensor_format_for_extension("t.btf") == convert::TensorFormat::btf);
    CHECK(convert::tensor_format_for_extension("t.pt") == std::nullopt);
    CHECK(convert::tensor_format_for_extension("noext") == std::nullopt);
    // The forms that choose the format by extension refuse, naming the path.
    expect_error([] { convert::read_tensor_file("t.pt"); }, ErrorCode::unsupported,
                 "t.pt: unknown tensor file extension '.pt'");
    expect_error([] { convert::write_tensor_file("w.h5", {}); }, ErrorCode::unsupported, "HDF5");
    CHECK(convert::tensor_format_name(convert::TensorFormat::safetensors) == "safetensors");
  }
}
