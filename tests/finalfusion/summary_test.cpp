// summarize(): what the chunk headers say equals what a full read finds, for
// every finalfusion file of the shared test data.
#include <doctest/doctest.h>

#include "ff_test_support.hpp"

using namespace modelzip;
using namespace modelzip::finalfusion;

TEST_SUITE("finalfusion") {
  TEST_CASE("summarize agrees with Embeddings::read on every shared .fifu file") {
    for (const char* name :
         {"embeddings.fifu", "ff_buckets.fifu", "pq.fifu", "quantized.fifu",
          "similarity-normalized.fifu", "similarity.fifu", "simple_vocab.fifu"}) {
      CAPTURE(name);
      const Bytes file = modelzip::testing::ff_bytes(name);
      const FileSummary s = summarize(file);
      const Embeddings e = Embeddings::read(file);
      CHECK(s.vocab == e.vocab().kind());
      CHECK(s.words == e.vocab().words_len());
      CHECK(s.subword_rows == e.vocab().rows() - e.vocab().words_len());
      CHECK(s.min_n == e.vocab().min_n());
      CHECK(s.max_n == e.vocab().max_n());
      CHECK(s.rows == e.rows());
      CHECK(s.dims == e.dims());
      CHECK(s.quantizer.has_value() == e.quantized());
      if (s.quantizer) {
        CHECK(s.quantizer->n_subquantizers == e.quantizer()->n_subquantizers);
        CHECK(s.quantizer->n_centroids == e.quantizer()->n_centroids);
        CHECK(s.quantizer->has_projection == e.quantizer()->has_projection);
      }
      CHECK(s.norms == e.has_norms());
      CHECK(s.metadata == e.metadata().has_value());
      // A cut file is an error, not a guess.
      CHECK_THROWS_AS(summarize(file.slice(0, file.size() / 2)), Error);
    }
  }
}
