// Damaged and lying inputs: every truncation, byte flips, random bytes and
// hand-made headers that lie about sizes, shapes and offsets. Each must give
// a clean modelzip::Error (never a crash, hang or other exception; the
// AddressSanitizer build checks for out-of-bounds reads), or a valid result
// where the damage happens to leave a valid file.
#include <random>

#include "convert_test_support.hpp"
#include "core/checked.hpp"
#include "io/durable_file.hpp"
#include "source_naming.hpp"
#include "zip/zip_stream_writer.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

using Reader = std::function<void(const Bytes&)>;

void read_npy(const Bytes& b) {
  convert::read_npy(b, "x");
}
void read_npz(const Bytes& b) {
  convert::read_npz(b);
}
void read_st(const Bytes& b) {
  convert::read_safetensors(b);
}
void read_btf(const Bytes& b) {
  convert::read_btf(b);
}

// Runs `read`; true if it succeeded, false on modelzip::Error. Any other
// exception fails the test.
bool clean(const Reader& read, const Bytes& input, std::optional<ErrorCode>* code = nullptr) {
  try {
    read(input);
    return true;
  } catch (const Error& e) {
    if (code) *code = e.code();
    return false;
  } catch (const std::exception& e) {
    FAIL("not a modelzip::Error: " << e.what());
    return false;
  }
}

Bytes modified(const Bytes& b, std::size_t at, std::byte x) {
  std::vector<std::byte> v(b.span().begin(), b.span().end());
  v[at] ^= x;
  return Bytes::take(std::move(v));
}

struct Golden {
  std::string file;
  Reader read;
  bool truncation_always_fails;
};

const Golden kGolden[] = {
    {"f4.npy", read_npy, true},
    {"i2_fortran_3d.npy", read_npy, true},
    {"unicode.npy", read_npy, true},
    {"unicode_big_endian.npy", read_npy, true},
    {"u8_big_endian.npy", read_npy, true},
    {"c16_big_endian.npy", read_npy, true},
    {"v2.npy", read_npy, true},
    {"v3.npy", read_npy, true},
    {"savez.npz", read_npz, true},
    {"savez_compressed.npz", read_npz, true},
    {"model.safetensors", read_st, true},
    {"unpadded.safetensors", read_st, true},
    {"tensors.btf", read_btf, false},
};

// --- hand-made files ---------------------------------------------------------

std::string npy_file(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict + "\n";
  std::string s = "\x93NUMPY";
  s += static_cast<char>(major);
  s += '\0';
  const std::size_t n = header.size();
  s += static_cast<char>(n & 0xFF);
  s += static_cast<char>((n >> 8) & 0xFF);
  if (major != 1) s += std::string("\0\0", 2);
  return s + header + data;
}

std::string npy_dict(const std::string& descr, const std::string& shape,
                     const std::string& fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

std::string le64(std::uint64_t v) {
  std::string s(8, '\0');
  detail::store_le<std::uint64_t>(reinterpret_cast<std::byte*>(s.data()), v);
  return s;
}

std::string st_file(const std::string& json, const std::string& data) {
  return le64(json.size()) + json + data;
}

std::string btf_file(const std::vector<std::uint64_t>& words, const std::string& tail = "") {
  std::string s;
  for (auto w : words) s += le64(w);
  return s + tail;
}

// rank, dtype, layout packed as the second header word.
std::uint64_t btf_kind(std::uint8_t dtype, std::uint8_t layout) {
  return dtype | (static_cast<std::uint64_t>(layout) << 8);
}

void expect_npy(const std::string& file, ErrorCode code, const std::string& part = "") {
  expect_error([&] { convert::read_npy(Bytes::copy_of(file), "x"); }, code, part);
}
void expect_st(const std::string& file, ErrorCode code, const std::string& part = "") {
  expect_error([&] { convert::read_safetensors(Bytes::copy_of(file)); }, code, part);
}
void expect_btf(const std::string& file, ErrorCode code, const std::string& part = "") {
  expect_error([&] { convert::read_btf(Bytes::copy_of(file)); }, code, part);
}

std::string st_tensor(const std::string& name, const std::string& dtype, const std::string& shape,
                      const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

}  // namespace

TEST_SUITE("convert") {
  TEST_CASE("corruption: every truncation of every golden file") {
    for (const auto& g : kGolden) {
      INFO("file " << g.file);
      Bytes file = golden_bytes(g.file);
      REQUIRE(clean(g.read, file));
      int failures = 0;
      for (std::size_t n = 0; n < file.size(); ++n) {
        std::optional<ErrorCode> code;
        const bool ok = clean(g.read, Bytes::copy_of(file.span().first(n)), &code);
        if (!ok) ++failures;
        if (g.truncation_always_fails) {
          INFO("truncated to " << n);
          CHECK_FALSE(ok);
        }
      }
      CHECK(failures > 0);
    }
  }

  TEST_CASE("corruption: byte flips in every golden file") {
    for (const auto& g : kGolden) {
      INFO("file " << g.file);
      Bytes file = golden_bytes(g.file);
      int errors = 0;
      for (std::size_t at = 0; at < file.size(); ++at)
        for (auto x : {std::byte{0xFF}, std::byte{0x01}, std::byte{0x80}})
          errors += !clean(g.read, modified(file, at, x));
      CHECK(errors > 0);
    }
  }

  TEST_CASE("corruption: random bytes, and random bytes after a valid prefix") {
    std::mt19937_64 rng(20240611);
    const Reader readers[] = {read_npy, read_npz, read_st, read_btf};
    for (int i = 0; i < 300; ++i) {
      Bytes junk = random_bytes(rng, rng() % 300);
      for (const auto& r : readers) clean(r, junk);
    }
    for (const auto& g : kGolden) {
      Bytes file = golden_bytes(g.file);
      for (int i = 0; i < 40; ++i) {
        std::size_t keep = rng() % file.size();
        std::vector<std::byte> v(file.span().begin(), file.span().begin() + keep);
        Bytes tail = random_bytes(rng, file.size() - keep);
        v.insert(v.end(), tail.span().begin(), tail.span().end());
        clean(g.read, Bytes::take(std::move(v)));
      }
    }
  }

  TEST_CASE("lying npy headers") {
    const std::string f4 = std::string("\0\0\x80\x3f", 4);
    CHECK(convert::read_npy(Bytes::copy_of(npy_file(npy_dict("<f4", "(1,)"), f4)), "x")[0]
              .tensor.numel() == 1);
    expect_npy(npy_file(npy_dict("<f8", "(4611686018427387904, 4611686018427387904)"), ""),
               ErrorCode::corrupt, "overflow");
    expect_npy(npy_file(npy_dict("<f4", "(1000000000000,)"), f4), ErrorCode::corrupt,
               "4000000000000 bytes");
    expect_npy(npy_file(npy_dict("<f4", "(1,)"), f4 + "x"), ErrorCode::corrupt, "holds 5");
    expect_npy(npy_file(npy_dict("<f4", "(-1,)"), ""), ErrorCode::corrupt, "negative");
    expect_npy(npy_file(npy_dict("<f4", "(99999999999999999999,)"), ""), ErrorCode::corrupt,
               "too large");
    expect_npy(npy_file("{'descr': '<f4', 'shape': (1,), }", f4), ErrorCode::corrupt, "must hold");
    expect_npy(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", f4),
               ErrorCode::corrupt, "unexpected key 'x'");
    expect_npy(
        npy_file("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", f4),
        ErrorCode::corrupt, "duplicate key");
    expect_npy(npy_file(npy_dict("<f4", "[1]"), f4), ErrorCode::corrupt, "not a tuple");
    expect_npy(npy_file(npy_dict("<f4", "(1)"), f4), ErrorCode::corrupt, "not a tuple");
    expect_npy(npy_file(npy_dict("<f4", "(1,)", "1"), f4), ErrorCode::corrupt, "fortran_order");
    expect_npy(npy_file(npy_dict("<f4", "(1,)") + " x", f4), ErrorCode::corrupt, "after");
    expect_npy(npy_file("{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}", f4),
               ErrorCode::corrupt);
    expect_npy(npy_file(npy_dict("<f4", "(1,)"), f4, 4), ErrorCode::unsupported, "version 4.0");
    std::string minor = npy_file(npy_dict("<f4", "(1,)"), f4);
    minor[7] = 1;
    expect_npy(minor, ErrorCode::unsupported, "version 1.1");
    std::string long_header = npy_file(npy_dict("<f4", "(1,)"), f4);
    long_header[8] = '\xFF';
    long_header[9] = '\x7F';
    expect_npy(long_header, ErrorCode::corrupt, ".npy header");
    std::string huge_v2 = npy_file(npy_dict("<f4", "(1,)"), f4, 2);
    huge_v2[11] = '\x7F';  // header length 0x7F00xxxx
    expect_npy(huge_v2, ErrorCode::limit_exceeded, "limit");
    std::string rank65 = "(";
    for (int i = 0; i < 65; ++i) rank65 += "1, ";
    rank65 += ")";
    expect_npy(npy_file(npy_dict("<f4", rank65), f4), ErrorCode::limit_exceeded, "rank 65");
    expect_npy(npy_file(npy_dict("<U0", "(1000000000000,)"), ""), ErrorCode::unsupported, "U0");
    // complex256 (numpy's long-double pairs) has no modelzip type; c8 and c16
    // must hold 8 and 16 bytes per element.
    expect_npy(npy_file(npy_dict("<c32", "(1,)"), std::string(32, '\0')), ErrorCode::unsupported,
               "<c32");
    expect_npy(npy_file(npy_dict(">c16", "(1,)"), f4 + f4), ErrorCode::corrupt,
               "describes 16 bytes");
    expect_npy(npy_file(npy_dict("|S4", "(1,)"), f4), ErrorCode::unsupported, "|S4");
    expect_npy(npy_file(npy_dict("|O", "(1,)"), f4 + f4), ErrorCode::unsupported, "object");
    expect_npy(npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", f4),
               ErrorCode::unsupported, "structured");
    // Unicode code units that are not Unicode scalar values.
    expect_npy(npy_file(npy_dict("<U1", "(1,)"), std::string("\x00\xD8\x00\x00", 4)),
               ErrorCode::corrupt, "Unicode scalar");
    expect_npy(npy_file(npy_dict("<U1", "(1,)"), std::string("\x00\x00\x11\x00", 4)),
               ErrorCode::corrupt, "Unicode scalar");
    // Python 2 long literals as old numpy wrote them.
    auto t = convert::read_npy(Bytes::copy_of(npy_file(npy_dict("|u1", "(3L,)"), "abc")), "x");
    CHECK(t[0].tensor.shape() == Shape{3});
    // Bad magic.
    expect_npy("\x93NUMPZ\x01\x00", ErrorCode::corrupt, "magic");
  }

  TEST_CASE("lying safetensors headers") {
    const std::string one = st_tensor("a", "U8", "[1]", "[0,1]");
    CHECK(convert::read_safetensors(Bytes::copy_of(st_file("{" + one + "}", "x"))).tensors.size() ==
          1);
    CHECK(convert::read_safetensors(Bytes::copy_of(st_file("{}", ""))).tensors.empty());
    CHECK(convert::read_safetensors(Bytes::copy_of(st_file("{" + one + "} \t\r\n", "x")))
              .tensors.size() == 1);
    expect_st(le64(UINT64_MAX) + "{}", ErrorCode::limit_exceeded, "limit");
    expect_st(le64(100'000'001) + "{}", ErrorCode::limit_exceeded, "limit");
    expect_st(le64(1000) + "{}", ErrorCode::corrupt, "needs 1000 bytes");
    expect_st("\x02\0\0", ErrorCode::corrupt, "header size");
    expect_st(st_file("", ""), ErrorCode::corrupt, "'{'");
    expect_st(st_file(" {}", ""), ErrorCode::corrupt, "'{'");
    expect_st(st_file("{" + st_tensor("a", "U8", "[1]", "[0,18446744073709551615]") + "}", "x"),
              ErrorCode::corrupt, "needs 1 bytes");
    expect_st(st_file("{" + st_tensor("a", "U8", "[1]", "[0,18446744073709551616]") + "}", "x"),
              ErrorCode::corrupt, "64 bits");
    expect_st(
        st_file("{" + st_tensor("a", "U8", "[4294967296,4294967296,4294967296]", "[0,1]") + "}",
                "x"),
        ErrorCode::corrupt, "overflow");
    expect_st(st_file("{" + st_tensor("a", "U8", "[9223372036854775808]", "[0,1]") + "}", "x"),
              ErrorCode::corrupt, "too large");
    expect_st(st_file("{" + one + "," + st_tensor("b", "U8", "[1]", "[2,3]") + "}", "xyz"),
              ErrorCode::corrupt, "gaps");
    expect_st(st_file("{" + st_tensor("a", "U8", "[2]", "[0,2]") + "," +
                          st_tensor("b", "U8", "[2]", "[1,3]") + "}",
                      "xyz"),
              ErrorCode::corrupt, "overlap");
    expect_st(st_file("{" + st_tensor("a", "U8", "[0]", "[1,0]") + "}", "x"), ErrorCode::corrupt);
    expect_st(st_file("{" + st_tensor("a", "F32", "[2]", "[0,4]") + "}", "abcd"),
              ErrorCode::corrupt, "needs 8 bytes");
    expect_st(st_file("{" + one + "}", "xy"), ErrorCode::corrupt, "cover 1 bytes");
    expect_st(st_file("{" + st_tensor("a", "U8", "[2]", "[0,2]") + "}", "x"), ErrorCode::corrupt,
              "past the end");
    expect_st(st_file("{" + st_tensor("a", "X", "[1]", "[0,1]") + "}", "x"), ErrorCode::corrupt,
              "unknown dtype");
    // safetensors dtypes modelzip has no type for (F8_E4M3, F8_E5M2, F8_E8M0, F4 and C64 it
    // has): F6 says why (no byte packing is defined).
    for (const char* dtype : {"F6_E2M3", "F6_E3M2"}) {
      INFO(dtype);
      expect_st(st_file("{" + st_tensor("a", dtype, "[4]", "[0,3]") + "}", "xyz"),
                ErrorCode::unsupported,
                "tensor 'a' has dtype " + std::string(dtype) +
                    ", which modelzip does not support (safetensors defines 6 bits per value but "
                    "not how they pack into bytes");
    }
    for (const char* dtype : {"PackedU4", "PackedI4"}) {
      INFO(dtype);
      expect_st(st_file("{" + st_tensor("a", dtype, "[2]", "[0,1]") + "}", "x"),
                ErrorCode::unsupported,
                "tensor 'a' has dtype " + std::string(dtype) + ", which modelzip does not support");
    }
    // F4's shape counts 4-bit values, two to a byte. An odd count ends in half
    // a byte (the library's MisalignedSlice); an even count whose last
    // dimension is odd is a valid file that float4_e2m1fn_x2 (torch's pair
    // type) cannot hold, as torch's safetensors loader refuses it.
    expect_st(st_file("{" + st_tensor("w", "F4", "[3]", "[0,1]") + "}", "x"), ErrorCode::corrupt,
              "tensor 'w' of dtype F4 has shape [3], an odd number of 4-bit values");
    expect_st(st_file("{" + st_tensor("w", "F4", "[]", "[0,1]") + "}", "x"), ErrorCode::corrupt,
              "tensor 'w' of dtype F4 has shape [], an odd number of 4-bit values");
    expect_st(st_file("{" + st_tensor("w", "F4", "[3,3]", "[0,5]") + "}", "12345"),
              ErrorCode::corrupt, "an odd number of 4-bit values");
    expect_st(st_file("{" + st_tensor("w", "F4", "[2,3]", "[0,3]") + "}", "xyz"),
              ErrorCode::unsupported,
              "tensor 'w' of dtype F4 has shape [2, 3], an odd last dimension");
    expect_st(st_file("{" + st_tensor("w", "F4", "[0,3]", "[0,0]") + "}", ""),
              ErrorCode::unsupported, "an odd last dimension");
    // Sizes count bytes: [2, 4] F4 values are 4 bytes, not 8 nor 2.
    expect_st(st_file("{" + st_tensor("w", "F4", "[2,4]", "[0,8]") + "}", "12345678"),
              ErrorCode::corrupt, "tensor 'w' of dtype F4 and shape [2, 4] needs 4 bytes");
    expect_st(st_file("{" + st_tensor("w", "F4", "[2,4]", "[0,2]") + "}", "12"), ErrorCode::corrupt,
              "needs 4 bytes");
    expect_st(st_file("{" + st_tensor("s", "F8_E8M0", "[2]", "[0,1]") + "}", "x"),
              ErrorCode::corrupt, "tensor 's' of dtype F8_E8M0 and shape [2] needs 2 bytes");
    for (const char* shape : {"[-1]", "[1.0]", "[1e3]", "[01]", "[1,]", "[[1]]", "[true]",
                              "[\"1\"]", "[1", "{}", "null"}) {
      INFO("shape " << shape);
      expect_st(st_file("{" + st_tensor("a", "U8", shape, "[0,1]") + "}", "x"), ErrorCode::corrupt);
    }
    for (const char* offsets : {"[0]", "[0,1,1]", "[]", "[0,-1]"}) {
      INFO("data_offsets " << offsets);
      expect_st(st_file("{" + st_tensor("a", "U8", "[1]", offsets) + "}", "x"), ErrorCode::corrupt);
    }
    expect_st(st_file("{" + one + "," + one + "}", "x"), ErrorCode::corrupt, "duplicate tensor");
    expect_st(st_file(R"({"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "x"),
              ErrorCode::corrupt, "duplicate field");
    expect_st(st_file(R"({"a":{"shape":[1],"data_offsets":[0,1]}})", "x"), ErrorCode::corrupt,
              "lacks 'dtype'");
    expect_st(st_file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}})", "x"),
              ErrorCode::corrupt, "unknown field");
    expect_st(st_file(R"({"__metadata__":{"a":"b"},"__metadata__":{}})", ""), ErrorCode::corrupt,
              "duplicate '__metadata__'");
    expect_st(st_file(R"({"__metadata__":{"a":"b","a":"c"}})", ""), ErrorCode::corrupt,
              "duplicate metadata key");
    // A value that is not a string names its key, at the value's offset.
    expect_st(st_file(R"({"__metadata__":{"a":1}})", ""), ErrorCode::corrupt,
              "offset 29: safetensors header: metadata key 'a': expected a string value");
    expect_st(st_file(R"({"__metadata__": {"format": {"x":"y"}}})", ""), ErrorCode::corrupt,
              "offset 36: safetensors header: metadata key 'format': expected a string value");
    expect_st(st_file(R"({"__metadata__":{"a":)", ""), ErrorCode::corrupt,
              "metadata key 'a': expected a string value");
    expect_st(st_file(R"({"__metadata__":{"a":"b",}})", ""), ErrorCode::corrupt);
    expect_st(st_file("{" + one + ",}", "x"), ErrorCode::corrupt);
    expect_st(st_file("{" + one + "} x", "x"), ErrorCode::corrupt, "after the JSON");
    expect_st(st_file("{" + one, "x"), ErrorCode::corrupt);
    expect_st(st_file("{\"\xC3\x28\":{}}", ""), ErrorCode::corrupt, "UTF-8");
    expect_st(st_file(R"({"__metadata__":{"a":"\ud800"}})", ""), ErrorCode::corrupt, "surrogate");
    expect_st(st_file(R"({"__metadata__":{"a":"\q"}})", ""), ErrorCode::corrupt, "escape");
    expect_st(st_file("{\"__metadata__\":{\"a\":\"\t\"}}", ""), ErrorCode::corrupt, "control");
    std::string rank65 = "[";
    for (int i = 0; i < 65; ++i) rank65 += i ? ",1" : "1";
    expect_st(st_file("{" + st_tensor("a", "U8", rank65 + "]", "[0,1]") + "}", "x"),
              ErrorCode::limit_exceeded, "rank 65");
    // Errors carry the byte offset of the fault.
    try {
      convert::read_safetensors(Bytes::copy_of(st_file("{\"a\":{\"dtype\":7}}", "")));
      FAIL("accepted");
    } catch (const Error& e) {
      REQUIRE(e.context().offset.has_value());
      CHECK(*e.context().offset == 8 + 14);
    }
  }

  TEST_CASE("lying BTF files") {
    const std::string u8_data("\x01\x02\0\0\0\0\0\0", 8);
    // One dense u8 tensor of 2 elements at offset 16.
    CHECK(convert::read_btf(Bytes::copy_of(btf_file({1, 16, 1, btf_kind(6, 0), 2}, u8_data)))
              .size() == 1);
    expect_btf(btf_file({1ull << 61, 16}), ErrorCode::corrupt, "room for");
    expect_btf(btf_file({UINT64_MAX}), ErrorCode::corrupt, "room for");
    expect_btf(btf_file({1, 20, 1, btf_kind(6, 0), 2}, u8_data), ErrorCode::corrupt,
               "multiple of 8");
    expect_btf(btf_file({1, 4096, 1, btf_kind(6, 0), 2}, u8_data), ErrorCode::corrupt,
               "past the end");
    expect_btf(btf_file({1, 8, 1, btf_kind(6, 0), 2}, u8_data), ErrorCode::corrupt, "offset table");
    expect_btf(btf_file({2, 24, 24, 1, btf_kind(6, 0), 2}, u8_data), ErrorCode::corrupt,
               "overlaps");
    expect_btf(btf_file({1, 16, 1ull << 63, btf_kind(6, 0)}), ErrorCode::limit_exceeded, "rank");
    expect_btf(btf_file({1, 16, 65, btf_kind(6, 0)}), ErrorCode::limit_exceeded, "rank 65");
    expect_btf(btf_file({1, 16, 3, btf_kind(4, 0), 1ull << 32, 1ull << 32, 1ull << 32}),
               ErrorCode::corrupt, "overflow");
    expect_btf(btf_file({1, 16, 1, btf_kind(4, 0), 1ull << 63}), ErrorCode::corrupt, "too large");
    expect_btf(btf_file({1, 16, 1, btf_kind(4, 0), 1ull << 40}, u8_data), ErrorCode::corrupt,
               "needs");
    expect_btf(btf_file({1, 16, 1, btf_kind(10, 0), 2}, u8_data), ErrorCode::corrupt,
               "unknown dtype 10");
    expect_btf(btf_file({1, 16, 1, btf_kind(6, 3), 2}, u8_data), ErrorCode::corrupt,
               "unknown layout 3");
    // COO f32 shape [3]: dims, index dims [nnz, 1], indices, value dims [nnz], values.
    auto coo = [](std::uint8_t layout, std::uint64_t nnz, std::uint64_t columns,
                  std::vector<std::uint64_t> indices, std::uint64_t value_count) {
      std::vector<std::uint64_t> w = {1, 16, 1, btf_kind(4, layout), 3, nnz, columns};
      w.insert(w.end(), indices.begin(), indices.end());
      w.push_back(value_count);
      return btf_file(w, std::string(value_count * 4, '\0'));
    };
    for (std::uint8_t layout : {1, 2}) {
      auto t = convert::read_btf(Bytes::copy_of(coo(layout, 2, 1, {0, 2}, 2)));
      CHECK(t[0].tensor.layout() == Layout::sparse_coo);
      CHECK(indices_of(t[0].tensor) == std::vector<std::int64_t>{0, 2});
    }
    expect_btf(coo(1, 2, 1, {0, 3}, 2), ErrorCode::corrupt, "outside dimension");
    expect_btf(coo(1, 1, 1, {UINT64_MAX}, 1), ErrorCode::corrupt, "outside dimension");
    expect_btf(coo(1, 2, 1, {0, 1}, 1), ErrorCode::corrupt, "2 indices but 1 values");
    expect_btf(coo(1, 1, 2, {0, 1}, 1), ErrorCode::corrupt, "2 columns");
    expect_btf(coo(1, 4, 1, {0, 1, 2, 0}, 4), ErrorCode::corrupt, "more values");
    expect_btf(coo(1, 1ull << 62, 1, {0}, 1), ErrorCode::corrupt);
  }

  TEST_CASE("lying npz archives: zip bomb, short size, CRC, foreign members") {
    Bytes file = golden_bytes("savez_compressed.npz");
    std::vector<std::byte> v(file.span().begin(), file.span().end());
    // Central directory entry of big.npy (deflated).
    std::size_t cd = 0;
    for (std::size_t i = 0; i + 46 + 7 <= v.size(); ++i)
      if (std::memcmp(v.data() + i, "PK\x01\x02", 4) == 0 &&
          std::memcmp(v.data() + i + 46, "big.npy", 7) == 0)
        cd = i;
    REQUIRE(cd != 0);
    REQUIRE(detail::load_le<std::uint16_t>(v.data() + cd + 10) == 8);  // deflate
    auto patched = [&](std::size_t field, std::uint32_t value) {
      std::vector<std::byte> p = v;
      detail::store_le<std::uint32_t>(p.data() + cd + field, value);
      return Bytes::take(std::move(p));
    };
    expect_error([&] { convert::read_npz(patched(24, 0x7FFFFFFF)); }, ErrorCode::limit_exceeded,
                 "ratio");
    expect_error([&] { convert::read_npz(patched(24, 100)); }, ErrorCode::corrupt, "big.npy");
    expect_error([&] { convert::read_npz(patched(16, 0x12345678)); }, ErrorCode::corrupt,
                 "big.npy");

    // Errors inside a member name the member.
    TempDir dir;
    // A zip of stored members.
    auto write_zip = [](const std::filesystem::path& path,
                        const std::vector<std::pair<std::string, std::string>>& members) {
      io::OutputFile out(path);
      zip::StreamZipWriter w(out.fd(), path.string(), 0);
      for (const auto& [name, content] : members) w.add_stored(name, {Bytes::copy_of(content)});
      w.finish();
      out.close();
    };
    write_zip(dir / "bad.npz", {{"ok.npy", npy_file(npy_dict("|u1", "(1,)"), "a")},
                                {"lie.npy", npy_file(npy_dict("|u1", "(9,)"), "a")}});
    try {
      convert::read_npz(io::read_file(dir / "bad.npz"));
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::corrupt);
      CHECK(e.context().entry == "lie.npy");
    }
    write_zip(dir / "foreign.npz", {{"readme.txt", "hello"}});
    expect_error([&] { convert::read_npz(io::read_file(dir / "foreign.npz")); },
                 ErrorCode::unsupported, "readme.txt");
    // Read from memory with a source: errors name it, and the member.
    try {
      convert::read_npz(io::read_file(dir / "bad.npz"), {}, "upload.npz");
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.context().archive == "upload.npz");
      CHECK(e.context().entry == "lie.npy");
      CHECK(std::string(e.what()).starts_with("upload.npz: entry 'lie.npy'"));
    }
  }

  TEST_CASE("Readers given a source name it in their errors; without one they name no file") {
    const Bytes npy = Bytes::copy_of(npy_file(npy_dict("|u1", "(9,)"), "a"));  // short data
    const Bytes st = Bytes::copy_of(std::string("\x02\0\0\0\0\0\0\0[]", 10));
    const Bytes btf = Bytes::copy_of(std::string(4, '\0'));
    const Bytes npz = Bytes::copy_of(std::string("PK\x05\x06"));
    const std::vector<std::pair<std::string, SourceReader>> readers = {
        {"npy",
         [&](std::string_view source) {
           source.empty() ? (void)convert::read_npy(npy, "x")
                          : (void)convert::read_npy(npy, "x", {}, source);
         }},
        {"npz",
         [&](std::string_view source) {
           source.empty() ? (void)convert::read_npz(npz) : (void)convert::read_npz(npz, {}, source);
         }},
        {"safetensors",
         [&](std::string_view source) {
           source.empty() ? (void)convert::read_safetensors(st)
                          : (void)convert::read_safetensors(st, {}, source);
         }},
        {"btf", [&](std::string_view source) {
           source.empty() ? (void)convert::read_btf(btf) : (void)convert::read_btf(btf, {}, source);
         }}};
    check_errors_name_source(readers, "s3://bucket/weights.bin");
  }
}
