// summarize(): what the chunk headers say equals what a full read finds, for
// every finalfusion file of the shared test data, and a hostile vocabulary
// chunk fails both alike.
#include <doctest/doctest.h>

#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

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

namespace {

// The identifier and the offset of the first chunk of a .fifu file whose
// identifier is among `ids`, found by walking the chunk frames
// (FINALFUSION.md section 1: magic, version, n u32 identifiers; then id u32,
// length u64, body).
std::pair<std::uint32_t, std::size_t> first_chunk(const std::vector<std::byte>& file,
                                                  std::initializer_list<std::uint32_t> ids) {
  auto u32 = [&file](std::size_t at) {
    std::uint32_t v;
    std::memcpy(&v, file.data() + at, 4);
    return v;
  };
  std::size_t at = 12 + 4 * std::size_t{u32(8)};
  while (at + 12 <= file.size()) {
    const std::uint32_t id = u32(at);
    std::uint64_t length;
    std::memcpy(&length, file.data() + at + 4, 8);
    for (std::uint32_t wanted : ids)
      if (id == wanted) return {id, at};
    at += 12 + static_cast<std::size_t>(length);
  }
  FAIL("no such chunk");
  return {0, 0};
}

// The identifier and the body's offset of the first vocabulary chunk.
std::pair<std::uint32_t, std::size_t> vocab_chunk(const std::vector<std::byte>& file) {
  const auto chunk = first_chunk(file, {1, 3, 7, 8, 9});
  return {chunk.first, chunk.second + 12};
}

// What Embeddings::read and summarize throw for `file` (empty: nothing).
std::pair<std::string, std::string> read_and_summary_errors(const std::vector<std::byte>& file) {
  std::pair<std::string, std::string> errors;
  try {
    (void)Embeddings::read(Bytes::copy_of(file));
  } catch (const Error& e) {
    errors.first = e.what();
  }
  try {
    (void)summarize(Bytes::copy_of(file));
  } catch (const Error& e) {
    errors.second = e.what();
  }
  return errors;
}

}  // namespace

TEST_SUITE("finalfusion") {
  TEST_CASE("summarize refuses a hostile vocabulary chunk with the reader's error") {
    // summarize read the vocabulary chunks' fixed fields itself: a bucket
    // exponent of 64, a minimum n-gram length of 0 or 2^40 declared words
    // gave a summary (0 buckets, 2^40 words) where every read fails.
    struct Patch {
      const char* what;
      std::size_t field;  // offset in the chunk body
      std::uint64_t value;
      int bytes;
      bool bucketed_only;
    };
    const Patch patches[] = {
        {"2^40 declared words", 0, std::uint64_t{1} << 40, 8, false},
        {"min_n 0", 8, 0, 4, true},
        {"min_n above max_n", 8, 100, 4, true},
        {"bucket exponent 64", 16, 64, 4, true},
    };
    int patched = 0;
    for (const char* name : {"simple_vocab.fifu", "ff_buckets.fifu", "embeddings.fifu"}) {
      const Bytes original = modelzip::testing::ff_bytes(name);
      const std::vector<std::byte> bytes(original.span().begin(), original.span().end());
      const std::pair<std::uint32_t, std::size_t> chunk = vocab_chunk(bytes);
      const std::uint32_t id = chunk.first;
      const std::size_t body = chunk.second;
      for (const Patch& p : patches) {
        if (p.bucketed_only && id != 3) continue;
        if (id == 8 || id == 9) continue;  // none in the test data
        std::vector<std::byte> file = bytes;
        std::memcpy(file.data() + body + p.field, &p.value, static_cast<std::size_t>(p.bytes));
        const auto errors = read_and_summary_errors(file);
        const std::string case_name = std::string(name) + ": " + p.what;
        CAPTURE(case_name);
        CHECK(!errors.first.empty());
        CHECK(errors.second == errors.first);
        ++patched;
      }
    }
    CHECK(patched >= 5);  // the files hold a simple and a bucket vocabulary
  }
}

namespace {

// The offset of the first storage chunk (NdArray, chunk 2, or
// QuantizedArray, chunk 4) and that of its rows field.
std::pair<std::size_t, std::size_t> storage_rows_field(const std::vector<std::byte>& file) {
  const auto chunk = first_chunk(file, {2, 4});
  // NdArray: rows u64 first; QuantizedArray: five u32, then rows u64.
  return {chunk.second, chunk.second + 12 + (chunk.first == 4 ? 20 : 0)};
}

// `bytes` with the storage chunk's rows field set to `rows`.
std::vector<std::byte> with_storage_rows(std::vector<std::byte> bytes, std::uint64_t rows) {
  const std::size_t field = storage_rows_field(bytes).second;
  std::memcpy(bytes.data() + field, &rows, 8);
  return bytes;
}

std::vector<std::byte> vector_of(const Bytes& b) {
  return std::vector<std::byte>(b.span().begin(), b.span().end());
}

}  // namespace

TEST_SUITE("finalfusion") {
  TEST_CASE("summarize refuses storage rows the vocabulary does not declare, naming both chunks") {
    // summarize took the subword rows from the vocabulary (buckets) or as
    // rows - words (explicit n-grams, 0 when rows < words) and never held
    // them against the storage: a file whose counts disagree got a summary
    // (ls printed it) where every read fails. Both now fail alike, with the
    // chunks and the numbers.
    struct Case {
      const char* file;
      std::uint64_t rows;
      const char* expected;  // the message after the offset
    };
    const Case cases[] = {
        {"ff_buckets.fifu", 1025,
         "NdArray chunk has 1025 rows, but BucketSubwordVocab declares 2 words + 1024 buckets "
         "= 1026 rows"},
        {"ff_buckets.fifu", 1,
         "NdArray chunk has 1 rows, but BucketSubwordVocab declares 2 words "
         "+ 1024 buckets = 1026 rows"},
        {"simple_vocab.fifu", 42, "NdArray chunk has 42 rows, but SimpleVocab declares 43 words"},
        {"pq.fifu", 40, "QuantizedArray chunk has 40 rows, but SimpleVocab declares 41 words"},
        {"simple_vocab.fifu", std::uint64_t{1} << 63,
         "NdArray chunk has 9223372036854775808 rows, but SimpleVocab declares 43 words"},
    };
    for (const Case& c : cases) {
      const std::string case_name = std::string(c.file) + " with " + std::to_string(c.rows);
      CAPTURE(case_name);
      const auto original = vector_of(modelzip::testing::ff_bytes(c.file));
      const std::size_t chunk = storage_rows_field(original).first;
      const auto errors = read_and_summary_errors(with_storage_rows(original, c.rows));
      CHECK(errors.second == "offset " + std::to_string(chunk) + ": " + c.expected);
      CHECK(errors.first == errors.second);
    }

    // An explicit n-gram vocabulary: words + 1 to n-grams rows (its distinct
    // indices). Its rows below the words gave "0 n-gram rows".
    const auto vocab =
        Vocab::explicit_ngrams({"Berlin", "Bern"}, 3, 4, {{"<Be", 10}, {"Ber", 11}, {"erl", 10}});
    const Embeddings e = Embeddings::from_matrix(vocab, std::vector<float>(4 * 2, 1.0f), 2);
    const auto file = vector_of(e.to_bytes());
    CHECK(summarize(Bytes::copy_of(file)).subword_rows == 2);
    const std::size_t chunk = storage_rows_field(file).first;
    for (std::uint64_t rows : {std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{6}}) {
      CAPTURE(rows);
      const auto errors = read_and_summary_errors(with_storage_rows(file, rows));
      CHECK(errors.second == "offset " + std::to_string(chunk) + ": NdArray chunk has " +
                                 std::to_string(rows) +
                                 " rows, but ExplicitSubwordVocab declares 2 words and 3 n-grams "
                                 "= 3 to 5 rows");
      CHECK(errors.first == errors.second);
    }
  }
}
