// Product quantization: determinism, reconstruction error, queries on
// quantized embeddings.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "ff_test_support.hpp"
#include "modelzip/finalfusion/convert.hpp"

using namespace modelzip;
using namespace modelzip::finalfusion;

TEST_SUITE("finalfusion") {
  TEST_CASE("quantization is deterministic and its error is what it reports") {
    auto e = Embeddings::open(modelzip::testing::ff_data("similarity.fifu"));
    PqOptions options;
    options.n_subquantizers = 10;
    options.n_centroids = 16;
    options.n_iterations = 10;
    options.seed = 7;
    auto a = e.quantize(options);
    auto b = e.quantize(options);
    const Bytes ba = a.embeddings.to_bytes(), bb = b.embeddings.to_bytes();
    REQUIRE(ba.size() == bb.size());
    CHECK(std::memcmp(ba.data(), bb.data(), ba.size()) == 0);
    // Recompute the mean squared error from the rows.
    double error = 0;
    std::vector<float> x(e.dims()), y(e.dims());
    for (std::size_t r = 0; r < e.rows(); ++r) {
      e.row(r, x);
      a.embeddings.row(r, y);
      for (std::size_t i = 0; i < x.size(); ++i) error += (x[i] - y[i]) * (x[i] - y[i]);
    }
    error /= static_cast<double>(e.rows() * e.dims());
    CHECK(a.mean_squared_error == doctest::Approx(error).epsilon(1e-6));
    // 16 centroids for 41 rows: far better than the mean vector.
    double variance = 0;
    for (std::size_t i = 0; i < e.dims(); ++i) {
      double mean = 0;
      for (std::size_t r = 0; r < e.rows(); ++r) mean += e.matrix()[r * e.dims() + i];
      mean /= static_cast<double>(e.rows());
      for (std::size_t r = 0; r < e.rows(); ++r) {
        const double d = e.matrix()[r * e.dims() + i] - mean;
        variance += d * d;
      }
    }
    variance /= static_cast<double>(e.rows() * e.dims());
    CHECK(a.mean_squared_error < 0.5 * variance);
    // With as many centroids as rows, every row can be its own centroid.
    options.n_centroids = 41;
    options.n_subquantizers = 4;
    CHECK(e.quantize(options).mean_squared_error < 1e-9);
    // Another seed, another (still valid) result.
    options.n_centroids = 16;
    options.n_subquantizers = 10;
    options.seed = 8;
    auto c = e.quantize(options).embeddings.to_bytes();
    CHECK((c.size() != ba.size() || std::memcmp(c.data(), ba.data(), ba.size()) != 0));
  }

  TEST_CASE("quantized embeddings answer queries close to the original") {
    auto e = read_word2vec_binary(modelzip::testing::ff_bytes("similarity.bin"));
    PqOptions options;
    options.n_subquantizers = 25;
    options.n_centroids = 32;
    auto q = e.quantize(options).embeddings;
    auto original = modelzip::testing::words_of(*e.similar("Berlin", 3));
    auto quantized = modelzip::testing::words_of(*q.similar("Berlin", 10));
    for (const auto& w : original)
      CHECK(std::find(quantized.begin(), quantized.end(), w) != quantized.end());
    // ADC similarities equal the cosine of reconstructed rows.
    auto berlin = *q.embedding("Berlin");
    auto top = *q.similar("Berlin", 3);
    for (const auto& hit : top) {
      auto other = *q.embedding(hit.word);
      double dot = 0;
      for (std::size_t i = 0; i < berlin.size(); ++i) dot += berlin[i] * other[i];
      CHECK(hit.similarity ==
            doctest::Approx(dot / modelzip::testing::l2(berlin) / modelzip::testing::l2(other))
                .epsilon(1e-5));
    }
    // Norms of known words survive quantization.
    CHECK(*q.norm("Berlin") == *e.norm("Berlin"));
    auto dense = q.dequantize();
    CHECK_FALSE(dense.quantized());
    CHECK(*dense.embedding("Berlin") == berlin);
  }

  TEST_CASE("quantization rejects impossible options") {
    auto e = Embeddings::open(modelzip::testing::ff_data("embeddings.fifu"));
    PqOptions options;
    options.n_subquantizers = 3;  // does not divide 10
    CHECK_THROWS_AS(e.quantize(options), Error);
    options.n_subquantizers = 5;
    options.n_centroids = 257;
    CHECK_THROWS_AS(e.quantize(options), Error);
    options.n_centroids = 4;
    auto q = e.quantize(options).embeddings;
    CHECK_THROWS_AS(q.quantize(options), Error);
    options.n_subquantizers = 0;  // default: a divisor of dims near dims / 2
    CHECK(e.quantize(options).embeddings.quantizer()->n_subquantizers == 5);
  }
}
