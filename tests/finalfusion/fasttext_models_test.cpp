// fastText models the converter reads beyond plain skipgram: supervised
// (labels), without character n-grams, product-quantized (.ftz, with and
// without -qnorm, dims that dsub does not divide, pruned n-gram buckets),
// built byte by byte from fastText's save() layout (Args::save,
// Dictionary::save, QuantMatrix::save, ProductQuantizer::save in fastText
// 0.9.2), and hostile variants. Expected vectors are computed here from the
// bytes written (fastText's addcode), not by the converter. Real models
// trained by the fasttext tool are checked in tests/cli/test_fasttext_models.py.
#include <doctest/doctest.h>

#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "ff_test_support.hpp"
#include "modelzip/finalfusion/convert.hpp"

using namespace modelzip;
using namespace modelzip::finalfusion;

namespace {

struct Writer {
  std::string bytes;
  template <class T>
  void put(T v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
};

struct Model {
  std::int32_t dim = 5;
  std::int32_t model = 3;  // supervised
  std::int32_t bucket = 0, minn = 0, maxn = 0;
  std::vector<std::string> words = {"cat", "dog", "</s>"};
  std::vector<std::string> labels = {"__label__a", "__label__b"};
  std::vector<std::pair<std::int32_t, std::int32_t>> pruned;  // bucket -> row
  std::int64_t prune_size = -1;
  bool quantized = true, qnorm = false;
  std::int32_t dsub = 2;
  // Hostile variants: a declared sub-quantizer count, extra code bytes.
  std::int32_t nsubq_override = -1;
  std::int32_t codesize_delta = 0;
  // One value written in place of the computed one (a dense matrix's
  // {row, column}; a centroid's {sub-quantizer, code, component}; with
  // norm_code_value, the norm quantizer's value of {code}), and where
  // bytes() wrote it.
  std::vector<std::int32_t> replaced_at;
  bool norm_code_value = false;
  float replacement = 0;
  mutable std::size_t replaced_offset = 0;

  float value(std::vector<std::int32_t> at, bool norm, float computed, std::size_t offset) const {
    if (at != replaced_at || norm != norm_code_value) return computed;
    replaced_offset = offset;
    return replacement;
  }

  std::int32_t nsubq() const { return dim / dsub + (dim % dsub != 0); }
  std::int32_t lastdsub() const { return dim % dsub ? dim % dsub : dsub; }
  std::int64_t rows() const {
    return static_cast<std::int64_t>(words.size()) + (prune_size >= 0 ? prune_size : bucket);
  }
  // Centroid j of code k of sub-quantizer m, component c: a value that
  // identifies all three.
  static float centroid_value(std::int32_t m, std::int32_t k, std::int32_t c) {
    return static_cast<float>(m * 1000 + k) + static_cast<float>(c) / 8.0f;
  }
  static std::uint8_t code(std::int64_t row, std::int32_t m) {
    return static_cast<std::uint8_t>((row * 7 + m * 3) % 256);
  }
  static std::uint8_t norm_code(std::int64_t row) { return static_cast<std::uint8_t>(row % 4); }
  static float norm_value(std::int32_t k) { return 0.5f + static_cast<float>(k); }

  // fastText's reconstruction of input row r (QuantMatrix::addToVector).
  std::vector<float> row(std::int64_t r) const {
    std::vector<float> out(static_cast<std::size_t>(dim), 0.0f);
    const float alpha = qnorm ? norm_value(norm_code(r)) : 1.0f;
    for (std::int32_t m = 0; m < nsubq(); ++m) {
      const std::int32_t width = m + 1 == nsubq() ? lastdsub() : dsub;
      for (std::int32_t c = 0; c < width; ++c)
        out[static_cast<std::size_t>(m * dsub + c)] += alpha * centroid_value(m, code(r, m), c);
    }
    return out;
  }

  Bytes bytes() const {
    Writer w;
    w.put<std::uint32_t>(793712314);
    w.put<std::uint32_t>(12);
    for (std::int32_t v : {dim, 5, 5, 1, 5, 2, 3 /* softmax */, model, bucket, minn, maxn, 100})
      w.put(v);
    w.put(1e-4);
    const auto size = static_cast<std::int32_t>(words.size() + labels.size());
    w.put(size);
    w.put(static_cast<std::int32_t>(words.size()));
    w.put(static_cast<std::int32_t>(labels.size()));
    w.put<std::int64_t>(1000);
    w.put(prune_size);
    for (std::size_t i = 0; i < words.size() + labels.size(); ++i) {
      const std::string& s = i < words.size() ? words[i] : labels[i - words.size()];
      w.bytes += s;
      w.bytes += '\0';
      w.put<std::int64_t>(10);
      w.put<std::int8_t>(i < words.size() ? 0 : 1);
    }
    for (auto [b, r] : pruned) {
      w.put(b);
      w.put(r);
    }
    w.put<std::uint8_t>(quantized);
    const std::int64_t m = rows();
    if (!quantized) {
      w.put(m);
      w.put<std::int64_t>(dim);
      for (std::int64_t r = 0; dim > 0 && r < m; ++r) {  // dim 0: m may be 2^31
        const auto v = row(r);
        for (std::int32_t c = 0; c < dim; ++c)
          w.put(value({static_cast<std::int32_t>(r), c}, false, v[static_cast<std::size_t>(c)],
                      w.bytes.size()));
      }
    } else {
      w.put<std::uint8_t>(qnorm);
      w.put(m);
      w.put<std::int64_t>(dim);
      w.put(static_cast<std::int32_t>(m * nsubq() + codesize_delta));
      for (std::int64_t r = 0; r < m; ++r)
        for (std::int32_t s = 0; s < nsubq(); ++s) w.put(code(r, s));
      for (std::int32_t extra = 0; extra < codesize_delta; ++extra) w.put<std::uint8_t>(0);
      w.put(dim);
      w.put(nsubq_override >= 0 ? nsubq_override : nsubq());
      w.put(dsub);
      w.put(lastdsub());
      for (std::int32_t s = 0; s < nsubq(); ++s) {
        const std::int32_t width = s + 1 == nsubq() ? lastdsub() : dsub;
        for (std::int32_t k = 0; k < 256; ++k)
          for (std::int32_t c = 0; c < width; ++c)
            w.put(value({s, k, c}, false, centroid_value(s, k, c), w.bytes.size()));
      }
      if (qnorm) {
        for (std::int64_t r = 0; r < m; ++r) w.put(norm_code(r));
        for (std::int32_t v : {1, 1, 1, 1}) w.put(v);
        for (std::int32_t k = 0; k < 256; ++k)
          w.put(value({k}, true, norm_value(k), w.bytes.size()));
      }
    }
    w.put<std::uint8_t>(0);  // qout; the output matrix is not read
    return Bytes::copy_of(w.bytes);
  }
};

void check_close(std::span<const float> got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
}

std::vector<float> unit(std::vector<float> v) {
  const float n = modelzip::testing::l2(v);
  for (auto& x : v) x /= n;
  return v;
}

}  // namespace

TEST_SUITE("finalfusion") {
  TEST_CASE("quantized supervised model without n-grams keeps quantized storage, exactly") {
    for (bool qnorm : {false, true})
      for (std::int32_t dim : {4, 5, 7}) {  // dsub 2: even, and a 1-component last part
        CAPTURE(qnorm);
        CAPTURE(dim);
        Model m;
        m.dim = dim;
        m.qnorm = qnorm;
        const Bytes file = m.bytes();
        // Raw: rows as fastText reconstructs them.
        auto raw = read_fasttext(file, ConvertOptions{Utf8Policy::strict, false});
        CHECK(raw.quantized());
        CHECK(raw.vocab().kind() == VocabKind::simple);
        CHECK(raw.vocab().words_len() == 3);  // labels left out
        CHECK_FALSE(raw.vocab().word_index("__label__a"));
        CHECK(raw.metadata()->find("labels")->as_integer() == 2);
        for (std::size_t w = 0; w < 3; ++w) check_close(*raw.embedding(m.words[w]), m.row(w));
        // Normalized: unit rows, the fastText norms kept.
        auto normalized = read_fasttext(file);
        CHECK(normalized.quantized());
        for (std::size_t w = 0; w < 3; ++w) {
          check_close(*normalized.embedding(m.words[w]), unit(m.row(w)));
          CHECK(*normalized.norm(m.words[w]) ==
                doctest::Approx(modelzip::testing::l2(m.row(w))).epsilon(1e-6));
        }
        // Written and read back as finalfusion, unchanged.
        auto again = Embeddings::read(normalized.to_bytes());
        check_close(*again.embedding("dog"), unit(m.row(1)));
      }
  }

  TEST_CASE("quantized model with character n-grams: dense word vectors, pruned buckets zero") {
    Model m;
    m.model = 2;  // skipgram
    m.labels.clear();
    m.minn = 2;
    m.maxn = 3;
    m.bucket = 50;
    m.qnorm = true;
    // Keep two buckets: the ones of "<c" and "at>".
    const std::int32_t b0 = static_cast<std::int32_t>(fasttext_bucket("<c", 50));
    const std::int32_t b1 = static_cast<std::int32_t>(fasttext_bucket("at>", 50));
    REQUIRE(b0 != b1);
    m.pruned = {{b0, 0}, {b1, 1}};
    m.prune_size = 2;
    auto e = read_fasttext(m.bytes(), ConvertOptions{Utf8Policy::strict, false});
    CHECK_FALSE(e.quantized());
    CHECK(e.vocab().kind() == VocabKind::fasttext_subwords);
    CHECK(e.rows() == 3 + 50);
    // A word's vector: the mean of its own row and the rows of its n-grams
    // whose bucket was kept (row 3 + j for the j-th kept bucket).
    auto expected = [&](const std::string& word, std::size_t index) {
      std::vector<float> sum = m.row(static_cast<std::int64_t>(index));
      int count = 1;
      const std::string s = "<" + word + ">";
      for (std::size_t i = 0; i < s.size(); ++i)
        for (std::size_t n = 2; n <= 3 && i + n <= s.size(); ++n) {
          const auto b = static_cast<std::int32_t>(fasttext_bucket(s.substr(i, n), 50));
          for (std::size_t j = 0; j < m.pruned.size(); ++j)
            if (m.pruned[j].first == b) {
              auto add = m.row(3 + static_cast<std::int64_t>(j));
              for (std::size_t t = 0; t < sum.size(); ++t) sum[t] += add[t];
              ++count;
            }
        }
      for (auto& v : sum) v /= static_cast<float>(count);
      return sum;
    };
    check_close(*e.embedding("cat"), expected("cat", 0));
    check_close(*e.embedding("dog"), expected("dog", 1));
    CHECK(expected("cat", 0) != m.row(0));  // the kept buckets count
    std::vector<float> row(static_cast<std::size_t>(m.dim));
    e.row(3 + static_cast<std::size_t>(b0), row);
    check_close(row, m.row(3));
    std::int32_t other = 0;
    while (other == b0 || other == b1) ++other;
    e.row(3 + static_cast<std::size_t>(other), row);
    check_close(row, std::vector<float>(row.size(), 0.0f));
  }

  TEST_CASE("dense supervised and maxn 0 models: simple vocabulary of the word rows") {
    Model m;
    m.quantized = false;
    m.bucket = 20;  // word n-gram buckets of a supervised model: not word vectors
    auto e = read_fasttext(m.bytes(), ConvertOptions{Utf8Policy::strict, false});
    CHECK(e.vocab().kind() == VocabKind::simple);
    CHECK(e.rows() == 3);
    check_close(*e.embedding("</s>"), m.row(2));
  }

  TEST_CASE("a vector that cannot be normalized is refused at the offset of the value to blame") {
    // Refused as "row N" without an offset, and for a NaN in an n-gram's row
    // under the word's row number; a quantized row with a NaN norm factor was
    // stored silently (with a NaN norm).
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    auto refused = [](const Model& m, const std::string& says) {
      const Bytes file = m.bytes();
      CAPTURE(says);
      REQUIRE(m.replaced_offset > 0);
      try {
        read_fasttext(file, {}, "m.bin");
        FAIL("accepted");
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::corrupt);
        CHECK(e.context().archive == "m.bin");
        CHECK(e.context().offset == m.replaced_offset);
        CHECK_MESSAGE(e.message().find(says) != std::string::npos, e.message());
        CHECK(e.message().find("--no-normalize") != std::string::npos);
      }
      // Read without normalizing, the model is kept as it is.
      CHECK_NOTHROW(read_fasttext(file, ConvertOptions{Utf8Policy::strict, false}));
    };
    Model ngrams;
    ngrams.model = 2;
    ngrams.labels.clear();
    ngrams.quantized = false;
    ngrams.minn = 2;
    ngrams.maxn = 3;
    ngrams.bucket = 50;
    Model m = ngrams;
    m.replaced_at = {1, 2};
    m.replacement = inf;
    refused(m, "fastText word 1 ('dog'): component 3 of input row 1 is inf (the word's own row)");
    // A row of one of cat's n-grams ("<c").
    const auto b = static_cast<std::int32_t>(fasttext_bucket("<c", 50));
    m.replaced_at = {3 + b, 0};
    m.replacement = nan;
    refused(m, "fastText word 0 ('cat'): component 1 of input row " + std::to_string(3 + b) +
                   " is NaN (a row of one of its n-grams)");
    // A bucket of no word's n-gram: only unknown words would use it.
    std::set<std::int32_t> used;
    for (std::string word : {"<cat>", "<dog>"})
      for (std::size_t i = 0; i < word.size(); ++i)
        for (std::size_t n = 2; n <= 3 && i + n <= word.size(); ++n)
          used.insert(static_cast<std::int32_t>(fasttext_bucket(word.substr(i, n), 50)));
    std::int32_t unused = 0;
    while (used.count(unused)) ++unused;
    m.replaced_at = {3 + unused, 4};
    m.replacement = -inf;
    refused(m, "fastText n-gram bucket " + std::to_string(unused) + ": component 5 of input row " +
                   std::to_string(3 + unused) + " is -inf, and the vector of any word");
    // Without n-grams: the word's row.
    m = Model{};
    m.quantized = false;
    m.replaced_at = {2, 0};
    m.replacement = nan;
    refused(m, "fastText word 2 ('</s>'): component 1 of input row 2 is NaN");
    // Quantized: the centroid the row's code selects, or its norm factor.
    m = Model{};
    m.replaced_at = {0, Model::code(1, 0), 1};
    m.replacement = inf;
    refused(m, "fastText word 1 ('dog'): component 2 of input row 1 is inf");
    m = Model{};
    m.qnorm = true;
    m.replaced_at = {Model::norm_code(1)};
    m.norm_code_value = true;
    m.replacement = nan;
    refused(m, "fastText word 1 ('dog'): the quantized norm factor of input row 1 is NaN");
    // Finite values whose norm is beyond float32's range: the word's own row.
    m = Model{};
    m.quantized = false;
    m.replaced_at = {1, 0};
    m.replacement = 3e38f;
    const Bytes once = m.bytes();
    std::string twice(once.as_string_view());
    std::memcpy(twice.data() + m.replaced_offset + 4, &m.replacement, 4);
    try {
      read_fasttext(Bytes::copy_of(twice));
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.context().offset == m.replaced_offset);
      CHECK_MESSAGE(e.message().find("fastText word 1 ('dog'): its norm 4.24e+38 is beyond") !=
                        std::string::npos,
                    e.message());
    }
  }

  TEST_CASE("hostile fastText models give errors with the reason") {
    auto fails = [](const Model& m, ErrorCode code, const std::string& needle) {
      try {
        read_fasttext(m.bytes());
        FAIL("accepted");
      } catch (const Error& e) {
        CHECK(e.code() == code);
        const std::string what = e.what();
        INFO(what);
        CHECK(std::string(e.what()).find(needle) != std::string::npos);
      }
    };
    Model m;
    m.nsubq_override = 9;
    fails(m, ErrorCode::corrupt, "inconsistent layout");
    m = Model{};
    m.codesize_delta = 1;
    fails(m, ErrorCode::corrupt, "does not fit");
    m = Model{};
    m.labels = {"__label__a"};
    m.words = {"cat", "dog"};
    {
      // A label before a word.
      Model swapped = m;
      Bytes b = swapped.bytes();
      std::string s(b.as_string_view());
      auto at = s.find("dog");
      s[at + 3 + 1 + 8] = 1;  // dog's type byte
      try {
        read_fasttext(Bytes::copy_of(s));
        FAIL("accepted");
      } catch (const Error& e) {
        CHECK(std::string(e.what()).find("expected 0 (word)") != std::string::npos);
      }
    }
    m = Model{};
    m.model = 2;
    m.labels.clear();
    m.minn = 2;
    m.maxn = 3;
    m.bucket = 50;
    m.pruned = {{60, 0}};  // bucket beyond 50
    m.prune_size = 1;
    fails(m, ErrorCode::corrupt, "pruning table maps bucket 60");
    m.pruned = {{1, 0}};
    m.bucket = 2000000000;  // a dense matrix of 2e9 rows from a tiny file
    fails(m, ErrorCode::limit_exceeded, "times the model file's size");
    m = Model{};
    m.maxn = 3;
    m.bucket = 0;
    fails(m, ErrorCode::corrupt, "without buckets");
    // Dimension 0: the matrix of 2^31 - 1 n-gram rows takes no bytes (the
    // reader visited every bucket's row, seconds of work for a tiny file).
    m = Model{};
    m.dim = 0;
    m.quantized = false;
    m.model = 2;
    m.labels.clear();
    m.minn = 3;
    m.maxn = 6;
    m.bucket = 2147483647;
    try {
      read_fasttext(m.bytes());
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::corrupt);
      CHECK(e.context().offset == 8);
      CHECK_MESSAGE(std::string(e.what()).find("fastText: dimension 0") != std::string::npos,
                    e.what());
    }
    // Cut anywhere: an error, never a crash.
    Model ok;
    ok.qnorm = true;
    const std::string whole(ok.bytes().as_string_view());
    for (std::size_t cut = 0; cut + 1 < whole.size(); cut += 7) {
      try {
        read_fasttext(Bytes::copy_of(whole.substr(0, cut)));
        // The output matrix is not read: a cut there still converts.
      } catch (const Error&) {
      }
    }
  }
}
