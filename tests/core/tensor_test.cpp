#include <doctest/doctest.h>

#include <complex>
#include <cstring>
#include <string>
#include <vector>

#include "modelzip/error.hpp"
#include "modelzip/quantization.hpp"
#include "modelzip/tensor.hpp"

using namespace modelzip;

namespace {
template <class T>
Bytes bytes_from(std::vector<T> v) {
  std::vector<std::byte> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return Bytes::take(std::move(b));
}

// What as<T>() of `t` says: "" when it accepts T, else the Error's message
// (which must be an invalid_argument Error).
template <class T>
std::string view_message(const Tensor& t) {
  try {
    (void)t.as<T>();
    return "";
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    return e.what();
  }
}

// view_message of every element type as<T>() knows, in this order.
const char* const kViewTypes[] = {"std::int8_t",   "std::int16_t",        "std::int32_t",
                                  "std::int64_t",  "std::uint8_t",        "std::uint16_t",
                                  "std::uint32_t", "std::uint64_t",       "float",
                                  "double",        "std::complex<float>", "std::complex<double>"};
std::vector<std::string> view_messages(const Tensor& t) {
  return {view_message<std::int8_t>(t),
          view_message<std::int16_t>(t),
          view_message<std::int32_t>(t),
          view_message<std::int64_t>(t),
          view_message<std::uint8_t>(t),
          view_message<std::uint16_t>(t),
          view_message<std::uint32_t>(t),
          view_message<std::uint64_t>(t),
          view_message<float>(t),
          view_message<double>(t),
          view_message<std::complex<float>>(t),
          view_message<std::complex<double>>(t)};
}

// Checks that as<T>() of `t` accepts exactly the type named `accepted` and
// refuses every other with "as<T>() of a <what> tensor...use as<accepted>()".
void check_views(const Tensor& t, const std::string& accepted, const std::string& what) {
  const std::vector<std::string> messages = view_messages(t);
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string type = kViewTypes[i];
    INFO(what, " as<", type, ">(): ", messages[i]);
    if (type == accepted) {
      CHECK(messages[i].empty());
    } else {
      const std::string article = what.starts_with("int") ? "an " : "a ";
      CHECK(messages[i].find("as<" + type + ">() of " + article + what + " tensor") !=
            std::string::npos);
      CHECK(messages[i].find("use as<" + accepted + ">()") != std::string::npos);
    }
  }
}
}  // namespace

TEST_CASE("Dense tensors check their byte size") {
  Tensor t = Tensor::dense(DType::float32, {2, 3}, bytes_from<float>({1, 2, 3, 4, 5, 6}));
  CHECK(t.numel() == 6);
  CHECK(t.as<float>()[5] == 6.0f);
  CHECK_THROWS_AS(t.as<double>(), Error);
  CHECK_THROWS_AS(Tensor::dense(DType::float32, {2, 3}, bytes_from<float>({1})), Error);
  CHECK_THROWS_AS(Tensor::dense(DType::float32, {-1}, Bytes()), Error);
}

TEST_CASE("Scalars and empty tensors") {
  Tensor s = Tensor::dense(DType::int64, {}, bytes_from<std::int64_t>({42}));
  CHECK(s.rank() == 0);
  CHECK(s.numel() == 1);
  Tensor e = Tensor::dense(DType::float64, {3, 0, 2}, Bytes());
  CHECK(e.numel() == 0);
  CHECK(e.nbytes() == 0);
}

TEST_CASE("Shapes whose element count overflows are rejected") {
  CHECK_THROWS_AS(shape_numel(std::vector<std::int64_t>{1ll << 40, 1ll << 40}), Error);
  CHECK(shape_numel(std::vector<std::int64_t>{0, 1ll << 62, 1ll << 62}) == 0);
}

TEST_CASE("String tensors") {
  std::vector<std::string> words = {"", "a b", "\xC3\xBC", "line\nbreak"};
  Tensor t = Tensor::strings({2, 2}, words);
  for (std::size_t i = 0; i < words.size(); ++i) CHECK(t.string_at(i) == words[i]);
  CHECK_THROWS_AS(t.string_at(4), Error);
  std::vector<std::string> bad = {"\xFF"};
  CHECK_THROWS_AS(Tensor::strings({1}, bad), Error);
  // Rebuilding from parts validates offsets.
  Tensor again = Tensor::strings({2, 2}, t.offsets(), t.values());
  CHECK(again == t);
  CHECK_THROWS_AS(Tensor::strings({4}, bytes_from<std::uint64_t>({0, 9, 2, 3, 4}), t.values()),
                  Error);
}

TEST_CASE("Sparse COO tensors validate coordinates") {
  Tensor t = Tensor::sparse_coo(DType::float32, {3, 4}, 2, bytes_from<std::int64_t>({0, 1, 2, 3}),
                                bytes_from<float>({1.5f, -2.0f}));
  CHECK(t.layout() == Layout::sparse_coo);
  CHECK(t.nnz() == 2);
  CHECK_THROWS_AS(Tensor::sparse_coo(DType::float32, {3, 4}, 1, bytes_from<std::int64_t>({3, 0}),
                                     bytes_from<float>({1.f})),
                  Error);
  CHECK_THROWS_AS(Tensor::sparse_coo(DType::float32, {3, 4}, 1, bytes_from<std::int64_t>({0}),
                                     bytes_from<float>({1.f})),
                  Error);
}

TEST_CASE("to_owned copies and equality compares bytes") {
  std::vector<float> v = {1, 2};
  Tensor view =
      Tensor::dense(DType::float32, {2}, Bytes::borrow(std::as_bytes(std::span(v)), nullptr));
  Tensor owned = view.to_owned();
  CHECK(owned == view);
  v[0] = 9;
  CHECK_FALSE(owned == view);
}

TEST_CASE("as<T>() accepts exactly the dtype's element type") {
  const std::pair<DType, const char*> table[] = {{DType::bool_, "std::uint8_t"},
                                                 {DType::float16, "std::uint16_t"},
                                                 {DType::float32, "float"},
                                                 {DType::float64, "double"},
                                                 {DType::int8, "std::int8_t"},
                                                 {DType::int16, "std::int16_t"},
                                                 {DType::int32, "std::int32_t"},
                                                 {DType::int64, "std::int64_t"},
                                                 {DType::uint8, "std::uint8_t"},
                                                 {DType::uint16, "std::uint16_t"},
                                                 {DType::uint32, "std::uint32_t"},
                                                 {DType::uint64, "std::uint64_t"},
                                                 {DType::bfloat16, "std::uint16_t"},
                                                 {DType::float8_e4m3fn, "std::uint8_t"},
                                                 {DType::float8_e5m2, "std::uint8_t"},
                                                 {DType::complex64, "std::complex<float>"},
                                                 {DType::complex128, "std::complex<double>"},
                                                 {DType::float8_e8m0fnu, "std::uint8_t"},
                                                 {DType::float4_e2m1fn_x2, "std::uint8_t"}};
  REQUIRE(std::size(table) + 1 == std::size(kAllDTypes));  // every dtype but utf8
  for (const auto& [dtype, accepted] : table) {
    const std::string name(dtype_name(dtype));
    std::vector<std::byte> zeros(3 * dtype_size(dtype));
    check_views(Tensor::dense(dtype, {3}, Bytes::take(std::move(zeros))), accepted, name);
    // A sparse tensor views its values the same way (the MX types are never sparse).
    if (dtype == DType::float8_e8m0fnu || dtype == DType::float4_e2m1fn_x2) continue;
    std::vector<std::byte> one(dtype_size(dtype));
    check_views(Tensor::sparse_coo(dtype, {3}, 1, bytes_from<std::int64_t>({2}),
                                   Bytes::take(std::move(one))),
                accepted, name);
  }
}

TEST_CASE("as<T>() gives the values of the accepted type") {
  CHECK(Tensor::dense(DType::int32, {2}, bytes_from<std::int32_t>({-7, 9})).as<std::int32_t>()[0] ==
        -7);
  CHECK(Tensor::dense(DType::uint64, {1}, bytes_from<std::uint64_t>({~0ull}))
            .as<std::uint64_t>()[0] == ~0ull);
  CHECK(Tensor::dense(DType::float16, {1}, bytes_from<std::uint16_t>({0x3C00}))
            .as<std::uint16_t>()[0] == 0x3C00);
  CHECK(Tensor::dense(DType::bool_, {2}, bytes_from<std::uint8_t>({0, 1})).as<std::uint8_t>()[1] ==
        1);
  const Tensor c = Tensor::dense(DType::complex128, {1}, bytes_from<double>({0.5, -1}));
  CHECK(c.as<std::complex<double>>()[0] == std::complex<double>(0.5, -1));
  CHECK(c.as<const std::complex<double>>().size() == 1);
}

TEST_CASE("as<T>() of a same-size type of another dtype throws naming both") {
  const Tensor f = Tensor::dense(DType::float32, {2}, bytes_from<float>({1, 2}));
  CHECK(view_message<std::int32_t>(f) == "as<std::int32_t>() of a float32 tensor: use as<float>()");
  const Tensor d = Tensor::dense(DType::float64, {1}, bytes_from<double>({1}));
  CHECK(view_message<std::int64_t>(d).find("use as<double>()") != std::string::npos);
  const Tensor i = Tensor::dense(DType::int32, {1}, bytes_from<std::int32_t>({1}));
  CHECK(view_message<std::uint32_t>(i).find("of an int32 tensor: use as<std::int32_t>()") !=
        std::string::npos);
  const Tensor h = Tensor::dense(DType::bfloat16, {1}, bytes_from<std::uint16_t>({0x3F80}));
  CHECK(view_message<std::int16_t>(h).find("use as<std::uint16_t>() (the bits)") !=
        std::string::npos);
}

TEST_CASE("as<T>() of a string tensor: not viewable") {
  const std::vector<std::string> words = {"ab", "c"};
  const Tensor t = Tensor::strings({2}, words);
  for (const std::string& m : view_messages(t)) {
    CHECK(m.find("of a string tensor") != std::string::npos);
    CHECK(m.find("use string_at()") != std::string::npos);
  }
}

TEST_CASE("as<T>() of a quantized tensor: the stored integers as documented") {
  const auto quantized = [](QuantStorage storage, Bytes values) {
    Quantization q;
    q.storage = storage;
    q.scale = 1;
    if (storage == QuantStorage::int4) {
      q.scheme = QuantScheme::block_symmetric;
      q.block_size = 2;
      q.scale_dtype = DType::float32;
      q.scales = bytes_from<float>({1});
    }
    return Tensor::quantized(DType::float32, {2}, q, std::move(values));
  };
  const Tensor i8 = quantized(QuantStorage::int8, bytes_from<std::int8_t>({-3, 4}));
  CHECK(i8.as<std::int8_t>()[0] == -3);
  check_views(i8, "std::int8_t", "quantized float32");
  CHECK(view_message<std::uint8_t>(i8) ==
        "as<std::uint8_t>() of a quantized float32 tensor (int8 storage): use as<std::int8_t>() "
        "for the stored integers or dequantize() for the values");
  const Tensor u8 = quantized(QuantStorage::uint8, bytes_from<std::uint8_t>({200, 4}));
  CHECK(u8.as<std::uint8_t>()[0] == 200);
  check_views(u8, "std::uint8_t", "quantized float32");
  const Tensor i4 = quantized(QuantStorage::int4, bytes_from<std::uint8_t>({0x7F}));
  CHECK(i4.as<std::int8_t>().size() == 1);  // one byte: two packed elements
  check_views(i4, "std::int8_t", "quantized float32");
  CHECK(view_message<float>(i4).find("(int4 storage)") != std::string::npos);
}

// Accessors that return a reference into the Tensor return a copy when
// called on a temporary (`for (auto d : archive.tensor("w").shape())`).
TEST_CASE("Accessors of a temporary Tensor return copies that outlive it") {
  auto make = [] { return Tensor::strings({3}, std::vector<std::string>{"a", "bc", "def"}); };
  std::vector<std::int64_t> shape;
  for (std::int64_t d : make().shape()) shape.push_back(d);
  CHECK(shape == Shape{3});
  const Bytes& values = make().values();
  const Bytes& offsets = make().offsets();
  CHECK(values.as_string_view() == "abcdef");
  CHECK(offsets.size() == 4 * sizeof(std::uint64_t));
  auto sparse = [] {
    return Tensor::sparse_coo(DType::int32, {4}, 2, bytes_from<std::int64_t>({0, 3}),
                              bytes_from<std::int32_t>({7, 8}));
  };
  const Bytes& indices = sparse().indices();
  CHECK(indices.size() == 2 * sizeof(std::int64_t));
  const std::string& message = Error(ErrorCode::corrupt, "bad byte").message();
  const ErrorContext& context = Error(ErrorCode::corrupt, "x", {.entry = "e"}).context();
  CHECK(message == "bad byte");
  CHECK(context.entry == "e");
}

// View accessors called on a temporary return views that keep the memory
// alive: `for (float x : archive.tensor("w").as<float>())` read the values of
// a Tensor destroyed before the loop body ran when it owned them (read with
// ReadMode::copy, or from a deflated blob), and so did span() of a temporary
// Tensor's values() (AddressSanitizer and valgrind report the reads).
TEST_CASE("View accessors of a temporary Tensor or Bytes keep the memory they view alive") {
  auto floats = [] {
    return Tensor::dense(DType::float32, {3}, bytes_from<float>({1.5f, 2.5f, 3.5f}));
  };
  std::vector<float> seen;
  for (float x : floats().as<float>()) seen.push_back(x);
  CHECK(seen == std::vector<float>{1.5f, 2.5f, 3.5f});
  std::vector<std::byte> bytes;
  for (std::byte b : floats().values().span()) bytes.push_back(b);
  const float expected[] = {1.5f, 2.5f, 3.5f};
  REQUIRE(bytes.size() == sizeof expected);
  CHECK(std::memcmp(bytes.data(), expected, sizeof expected) == 0);
  std::string text;
  for (char c :
       Bytes::copy_of(std::string_view("text longer than a short string")).as_string_view())
    text += c;
  CHECK(text == "text longer than a short string");
  std::string first;
  for (char c : Tensor::strings({2}, std::vector<std::string>{"a first string on the heap", "b"})
                    .string_at(0))
    first += c;
  CHECK(first == "a first string on the heap");

  // A KeptView kept in a variable outlives the temporary too; it is the
  // span, and a part of it can keep the memory as well.
  auto kept = floats().as<float>();
  static_assert(std::is_same_v<decltype(kept), KeptView<std::span<const float>>>);
  const std::span<const float> plain = kept;
  CHECK(plain.size() == 3);
  const KeptView<std::span<const float>> tail(kept.subspan(1), kept);
  kept = KeptView<std::span<const float>>({}, nullptr);
  REQUIRE(tail.size() == 2);
  CHECK(tail[1] == 3.5f);
  // Views of an object that lives stay plain views.
  const Tensor t = floats();
  static_assert(std::is_same_v<decltype(t.as<float>()), std::span<const float>>);
  static_assert(std::is_same_v<decltype(t.string_at(0)), std::string_view>);
  static_assert(std::is_same_v<decltype(t.values().span()), std::span<const std::byte>>);
  static_assert(std::is_same_v<decltype(t.values().as_string_view()), std::string_view>);
}

// quantization() pointed into the Tensor whatever it was: called on a
// temporary (`auto q = archive.tensor("w").quantization(); q->scale`), the
// pointer outlived the Quantization (AddressSanitizer: stack-use-after-scope
// or heap-use-after-free). On a temporary it is a copy now.
TEST_CASE("quantization() of a temporary Tensor is a copy that outlives it") {
  auto make = [] {
    Quantization q;
    q.scheme = QuantScheme::block_symmetric;
    q.block_size = 2;
    q.scale_dtype = DType::float32;
    q.scales = bytes_from<float>({0.25f});
    return Tensor::quantized(DType::float32, {2}, q, bytes_from<std::int8_t>({-3, 4}));
  };
  auto q = make().quantization();
  REQUIRE(q);
  CHECK(q->scheme == QuantScheme::block_symmetric);
  CHECK(q->block_size == 2);
  CHECK(q->scale_at(0) == 0.25);  // the scales share the memory, which the copy keeps
  auto plain = [] { return Tensor::dense(DType::float32, {1}, bytes_from<float>({1})); };
  CHECK_FALSE(plain().quantization());
  // A Tensor that lives gives the pointer, as before.
  const Tensor t = make();
  static_assert(std::is_same_v<decltype(t.quantization()), const Quantization*>);
  static_assert(std::is_same_v<decltype(make().quantization()), std::optional<Quantization>>);
  CHECK(t.quantization()->scale_at(0) == 0.25);
}
