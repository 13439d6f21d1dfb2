// Every file of the shared finalfusion test data, cut at every byte offset
// (a sample of them under the sanitizers: tests/support/sweep.hpp)
// and with bytes changed at many (deterministic) random positions, gives a
// modelzip::Error or a valid result -- never a crash, a hang or another
// exception. Valid results are exercised (lookups, queries, rewriting).
// Run under -Db_sanitize=address,undefined this also proves no read goes
// out of bounds: every input is copied into a buffer of exactly its size.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

#include "ff_test_support.hpp"
#include "modelzip/finalfusion/convert.hpp"
#include "sweep.hpp"

using namespace modelzip;
using namespace modelzip::finalfusion;

namespace {

enum class Reader {
  fifu,
  word2vec,
  word2vec_lossy,
  text,
  text_lossy,
  text_dims,
  text_dims_lossy,
  fasttext
};

struct Case {
  const char* file;
  Reader reader;
};

const Case kCases[] = {
    {"embeddings.fifu", Reader::fifu},
    {"ff_buckets.fifu", Reader::fifu},
    {"pq.fifu", Reader::fifu},
    {"quantized.fifu", Reader::fifu},
    {"similarity-normalized.fifu", Reader::fifu},
    {"similarity.fifu", Reader::fifu},
    {"simple_vocab.fifu", Reader::fifu},
    {"similarity.bin", Reader::word2vec},
    {"analogy.bin", Reader::word2vec},
    {"utf8-incomplete.bin", Reader::word2vec_lossy},
    {"fasttext.bin", Reader::fasttext},
    {"similarity.txt", Reader::text_dims},
    {"utf8-incomplete.dims", Reader::text_dims_lossy},
    {"similarity.nodims", Reader::text},
    {"utf8-incomplete.txt", Reader::text_lossy},
};

Embeddings parse(Reader reader, const Bytes& data) {
  const ConvertOptions lossy{Utf8Policy::lossy, true};
  switch (reader) {
    case Reader::fifu:
      return Embeddings::read(data, "corrupted");
    case Reader::word2vec:
      return read_word2vec_binary(data);
    case Reader::word2vec_lossy:
      return read_word2vec_binary(data, lossy);
    case Reader::text:
      return read_text(data);
    case Reader::text_lossy:
      return read_text(data, lossy);
    case Reader::text_dims:
      return read_text_dims(data);
    case Reader::text_dims_lossy:
      return read_text_dims(data, lossy);
    case Reader::fasttext:
      return read_fasttext(data);
  }
  throw std::logic_error("unknown reader");
}

// Uses a valid result the way a caller would.
void exercise(const Embeddings& e) {
  const auto words = e.vocab().words();
  std::vector<float> row(e.dims());
  for (std::size_t r = 0; r < e.rows(); r += 1 + e.rows() / 8) e.row(r, row);
  for (std::string_view w : {std::string_view("Berlin"), std::string_view("unknown"),
                             std::string_view("\xFF\xFE"), std::string_view("")}) {
    (void)e.embedding(w);
    (void)e.norm(w);
  }
  if (!words.empty()) {
    (void)e.similar(words[0], 3);
    (void)e.analogy(words[0], words[words.size() - 1], words[words.size() / 2], 3);
  }
  // A valid result must write a file that reads back.
  auto back = Embeddings::read(e.to_bytes());
  REQUIRE(back.rows() == e.rows());
}

// Returns true for a valid result, false for a modelzip::Error; anything
// else fails the test. Valid results are exercised when `use` is set.
bool attempt(Reader reader, const Bytes& data, bool use = true) {
  try {
    auto e = parse(reader, data);
    if (use) exercise(e);
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

TEST_SUITE("finalfusion") {
  TEST_CASE("every file cut at every byte offset gives an Error or a valid result") {
    for (const auto& c : kCases) {
      CAPTURE(c.file);
      const Bytes original = modelzip::testing::ff_bytes(c.file);
      REQUIRE(attempt(c.reader, original));
      std::size_t valid = 0;
      const auto start = std::chrono::steady_clock::now();
      std::size_t first_valid = original.size();
      // Every cut (under the sanitizers a sample: tests/support/sweep.hpp).
      const auto cuts = modelzip::testing::sweep_points(0, original.size() - 1, 4096, 8);
      for (const std::uint64_t point : cuts) {
        const auto cut = static_cast<std::size_t>(point);
        CAPTURE(cut);
        // Every valid result is parsed; the first few and then every 256th
        // are also exercised (they repeat each other, e.g. fastText cuts
        // inside the unused output matrix).
        const bool ok = attempt(c.reader, Bytes::copy_of(original.span().first(cut)),
                                valid < 16 || cut % 256 == 0);
        if (ok && valid == 0) first_valid = cut;
        valid += ok;
      }
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - start)
                          .count();
      MESSAGE(std::string(c.file) << ": " << cuts.size() << " cuts, " << valid << " still valid ("
                                  << ms << " ms)");
      if (c.reader == Reader::fifu) {
        // Sizes up front: only a cut that drops a whole trailing optional
        // chunk (the norms) can stay valid.
        CHECK(valid <= 1);
      }
      if (c.reader == Reader::fasttext) {
        // Valid exactly when the input matrix is complete: it ends at byte
        // 53636 (Python: past the dictionary, the flag and the 257 x 50
        // floats); the output matrix after it is not needed.
        const auto complete = std::lower_bound(cuts.begin(), cuts.end(), std::uint64_t{53636});
        REQUIRE(complete != cuts.end());
        CHECK(first_valid == *complete);
        CHECK(valid == static_cast<std::size_t>(cuts.end() - complete));
      }
    }
  }

  TEST_CASE("every file with random bytes changed gives an Error or a valid result") {
    std::mt19937_64 rng(20240611);
    for (const auto& c : kCases) {
      CAPTURE(c.file);
      const Bytes original = modelzip::testing::ff_bytes(c.file);
      std::size_t valid = 0;
      const int rounds = 1500;
      for (int round = 0; round < rounds; ++round) {
        std::vector<std::byte> mutated(original.span().begin(), original.span().end());
        const int changes = 1 + static_cast<int>(rng() % 3);
        for (int k = 0; k < changes; ++k) {
          // Bias half of the changes towards the first 128 bytes, where the
          // headers and sizes are.
          const std::size_t span =
              (rng() % 2) ? std::min<std::size_t>(128, mutated.size()) : mutated.size();
          const std::size_t pos = rng() % span;
          mutated[pos] ^= static_cast<std::byte>(1 + rng() % 255);
        }
        CAPTURE(round);
        valid += attempt(c.reader, Bytes::take(std::move(mutated)));
      }
      MESSAGE(std::string(c.file) << ": " << rounds << " mutations, " << valid << " still valid");
    }
  }

  TEST_CASE("size fields set to extreme values fail cleanly") {
    // Overwrite every aligned 4- and 8-byte field in the first bytes of each
    // binary file with 0, 0xFF.. and 0x7F.. patterns.
    for (const auto& c : kCases) {
      if (c.reader != Reader::fifu && c.reader != Reader::fasttext && c.reader != Reader::word2vec)
        continue;
      CAPTURE(c.file);
      const Bytes original = modelzip::testing::ff_bytes(c.file);
      const std::size_t limit = std::min<std::size_t>(original.size(), 700);
      for (std::size_t pos = 0; pos + 8 <= limit; ++pos)
        for (std::uint64_t value : {0ull, ~0ull, 0x7fffffffffffffffull, 0x100000000ull}) {
          CAPTURE(pos);
          std::vector<std::byte> mutated(original.span().begin(), original.span().end());
          std::memcpy(mutated.data() + pos, &value, 8);
          attempt(c.reader, Bytes::take(std::move(mutated)));
        }
    }
  }
}
