// Quantized tensors through the Writer and Archive, and quantize_tag: one
// append that stores only the quantized weights and references everything
// else from the source tag.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "../zip/expect_error.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/quantize.hpp"
#include "modelzip/writer.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

Tensor normal(std::mt19937_64& rng, DType dt, Shape shape) {
  std::normal_distribution<float> dist(0.0f, 0.1f);
  const std::uint64_t n = shape_numel(shape);
  std::vector<float> f(n);
  for (auto& x : f) x = dist(rng);
  Tensor t =
      Tensor::dense(DType::float32, shape,
                    Bytes::copy_of(std::span(reinterpret_cast<const std::byte*>(f.data()), n * 4)));
  if (dt == DType::float32) return t;
  // float16 via a quantize-free path: round each value (exact for these small numbers' halves).
  std::vector<std::uint16_t> h(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, &f[i], 4);
    h[i] = static_cast<std::uint16_t>(bits >> 16);  // bfloat16 by truncation
  }
  return Tensor::dense(
      DType::bfloat16, shape,
      Bytes::copy_of(std::span(reinterpret_cast<const std::byte*>(h.data()), n * 2)));
}

std::map<std::string, ParamInfo> by_name(const std::vector<ParamInfo>& v) {
  std::map<std::string, ParamInfo> m;
  for (const auto& p : v) m.emplace(p.name, p);
  return m;
}

}  // namespace

TEST_CASE("Quantized tensors are written, listed, read zero-copy and verified") {
  TempDir dir;
  const auto path = dir / "q.zip";
  std::mt19937_64 rng(5);
  Tensor w = normal(rng, DType::float32, {64, 40});
  Tensor q8 = quantize(w, QuantizeRecipe::int8_per_channel);
  Tensor q4 = quantize(w, QuantizeRecipe::int4_block32);
  {
    Writer wr = Writer::open(path);
    NewTag t;
    t.add("w8", q8);
    t.add("w4", q4, ParamOptions{Compression::deflate});
    wr.add_tag("q", std::move(t));
    wr.commit();
  }
  Archive a = Archive::open(path);
  auto p = by_name(a.params("q"));
  CHECK(p["w8"].layout == Layout::quantized);
  CHECK(p["w8"].dtype == DType::float32);
  REQUIRE(p["w8"].quantization);
  CHECK(p["w8"].quantization->scheme == QuantScheme::affine_per_axis);
  CHECK(p["w8"].quantization->scales.empty());  // header only
  CHECK(p["w8"].nbytes == 64 * 40 + 64 * 16);
  REQUIRE(p["w4"].quantization);
  CHECK(p["w4"].quantization->storage == QuantStorage::int4);
  CHECK(p["w4"].quantization->block_size == 32);
  CHECK(p["w4"].nbytes == 64 * 40 / 2 + 64 * 2 * 2);
  Tensor r8 = a.tensor("w8", "q");
  CHECK(r8 == q8);
  CHECK(a.tensor("w4", "q", ReadMode::copy) == q4);
  CHECK(a.load("q").at("w4").dequantize() == q4.dequantize());
  CHECK(a.verify().empty());
}

TEST_CASE("quantize_tag: one append, quantized weights, references for the rest") {
  TempDir dir;
  const auto path = dir / "m.zip";
  std::mt19937_64 rng(9);
  {
    Writer wr = Writer::open(path);
    NewTag t;
    t.add("conv1.weight", normal(rng, DType::float32, {16, 3, 3, 3}));  // 432 < 1024: too small
    t.add("layer1.conv.weight", normal(rng, DType::float32, {32, 16, 3, 3}));  // 4608
    t.add("layer1.bn.weight", normal(rng, DType::float32, {32}));
    t.add("fc.weight", normal(rng, DType::bfloat16, {10, 512}));
    t.add("fc.bias", normal(rng, DType::float32, {10}));
    t.add("token_embedding.weight", normal(rng, DType::float32, {100, 64}));
    t.add("LayerNorm.weight2d", normal(rng, DType::float32, {64, 64}));
    t.add("steps",
          Tensor::dense(DType::int64, {64, 64}, Bytes::take(std::vector<std::byte>(64 * 64 * 8))));
    // 8-bit floats are left alone: a quantized tensor cannot stand for them.
    t.add("fp8.weight",
          Tensor::dense(DType::float8_e4m3fn, {64, 64},
                        Bytes::take(std::vector<std::byte>(64 * 64, std::byte{0x38}))));
    // So are complex tensors: the schemes map real values to integers.
    t.add("spectral.weight", Tensor::dense(DType::complex64, {64, 64},
                                           Bytes::take(std::vector<std::byte>(64 * 64 * 8))));
    wr.add_tag("float", std::move(t));
    wr.commit();
  }
  const auto size_before = std::filesystem::file_size(path);
  QuantizeOptions o;
  o.scheme = QuantizeRecipe::int8_per_channel;
  QuantizeResult r = quantize_tag(path, "FLOAT", "int8", o);
  CHECK(r.quantized == std::vector<std::string>{"layer1.conv.weight", "fc.weight"});
  CHECK(r.referenced.size() == 8);
  CHECK(r.appended);
  CHECK(r.source_bytes == 32 * 16 * 9 * 4 + 10 * 512 * 2);
  CHECK(r.quantized_bytes == 32 * 16 * 9 + 32 * 16 + 10 * 512 + 10 * 16);
  const auto size_after = std::filesystem::file_size(path);
  CHECK(size_after - size_before < r.quantized_bytes + 4096);  // no copies of the references

  Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"float", "int8"});
  auto p = by_name(a.params("int8"));
  for (const auto& name : r.referenced) {
    INFO(name);
    CHECK(p[name].shared);
    CHECK(p[name].owner_tag == "float");
    CHECK(p[name].blob == a.param(name, "float").blob);
  }
  CHECK_FALSE(p["fc.weight"].shared);
  CHECK(p["fc.weight"].layout == Layout::quantized);
  CHECK(p["fc.weight"].dtype == DType::bfloat16);
  CHECK(a.tensor("fc.weight", "int8") ==
        quantize(a.tensor("fc.weight", "float"), QuantizeRecipe::int8_per_channel));
  CHECK(a.verify().empty());

  SUBCASE("globs choose, whatever the default rules say") {
    QuantizeOptions g;
    g.scheme = QuantizeRecipe::int4_block32;
    g.params = {"*.bias", "token_*"};
    QuantizeResult r4 = quantize_tag(path, "float", "int4", g);
    CHECK(r4.quantized == std::vector<std::string>{"fc.bias", "token_embedding.weight"});
    Archive b = Archive::open(path);
    CHECK(b.param("fc.bias", "int4").quantization->storage == QuantStorage::int4);
    CHECK(b.param("conv1.weight", "int4").owner_tag == "float");
  }
  SUBCASE("a chain source: references name the tag that stores the blob") {
    QuantizeResult again = quantize_tag(path, "int8", "int8-again", o);
    CHECK(again.quantized.empty());  // int8 holds quantized and shared tensors only
    Archive b = Archive::open(path);
    CHECK(b.param("fc.weight", "int8-again").owner_tag == "int8");
    CHECK(b.param("fc.bias", "int8-again").owner_tag == "float");
  }
  SUBCASE("errors leave the archive as it was") {
    const auto bytes = io_bytes(path);
    QuantizeOptions bad;
    bad.params = {"nothing*"};
    CHECK_ERROR(quantize_tag(path, "float", "x", bad), ErrorCode::invalid_argument,
                "tag 'float': --params 'nothing*' matches no parameter");
    bad.params = {"steps"};
    CHECK_ERROR(quantize_tag(path, "float", "x", bad), ErrorCode::invalid_argument,
                "parameter 'steps': quantize: only float16, bfloat16, float32 and float64");
    bad.params = {"fp8.*"};
    CHECK_ERROR(quantize_tag(path, "float", "x", bad), ErrorCode::invalid_argument,
                "parameter 'fp8.weight': quantize: only float16, bfloat16, float32 and float64 "
                "tensors can be quantized, not float8_e4m3fn (a quantized tensor cannot stand for "
                "8-bit floats)");
    bad.params = {"spectral.*"};
    CHECK_ERROR(quantize_tag(path, "float", "x", bad), ErrorCode::invalid_argument,
                "parameter 'spectral.weight': quantize: only float16, bfloat16, float32 and "
                "float64 tensors can be quantized, not complex64 (complex tensors are not "
                "quantized: the schemes map real values to integers)");
    CHECK_ERROR(quantize_tag(path, "nope", "x", o), ErrorCode::not_found, "no tag 'nope'");
    // quantize_tag has no way to replace a tag: no hint names one.
    CHECK_ERROR(quantize_tag(path, "float", "INT8", o), ErrorCode::already_exists,
                "exists already (tags ignore case)");
    CHECK(::modelzip::testing::caught([&] { quantize_tag(path, "float", "INT8", o); })
              ->message()
              .ends_with("(tags ignore case)"));
    CHECK(io_bytes(path) == bytes);
  }
}

TEST_CASE("quantize_tag asks its progress callback during the commit too") {
  TempDir dir;
  const auto path = dir / "m.zip";
  std::mt19937_64 rng(3);
  {
    Writer wr = Writer::open(path);
    NewTag t;
    t.add("fc.weight", normal(rng, DType::float32, {64, 64}));
    wr.add_tag("float", std::move(t));
    wr.commit();
  }
  const auto bytes = io_bytes(path);
  const std::uint64_t total = 64 * 64 * 4;
  // The quantizing reports once (its one parameter); every later call is
  // the commit's, repeating that report. Saying stop there cancels.
  std::vector<Progress> calls;
  QuantizeOptions o;
  o.progress = [&](const Progress& p) {
    calls.push_back(p);
    return calls.size() < 2;
  };
  CHECK_ERROR(quantize_tag(path, "float", "int8", o), ErrorCode::cancelled, "cancelled");
  REQUIRE(calls.size() == 2);
  CHECK(calls[0] == Progress{total, total});
  CHECK(calls[1] == Progress{total, total});
  CHECK(io_bytes(path) == bytes);
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"float"});
}
