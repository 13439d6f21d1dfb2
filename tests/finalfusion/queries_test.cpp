// Similarity and analogy queries against the expectations of the
// finalfusion-rust test suite (similarity.rs, compat/fasttext/io.rs and the
// ffp-similar script test of finalfusion-python), batch lookups and
// concurrency.
#include <doctest/doctest.h>

#include <thread>

#include "ff_test_support.hpp"
#include "modelzip/finalfusion/convert.hpp"

using namespace modelzip;
using namespace modelzip::finalfusion;
using modelzip::testing::ff_data;
using modelzip::testing::words_of;

namespace {

const std::vector<std::string> kSimilarityOrder = {"Potsdam",        "Hamburg",
                                                   "Leipzig",        "Dresden",
                                                   "M\xC3\xBCnchen", "D\xC3\xBCsseldorf",
                                                   "Bonn",           "Stuttgart",
                                                   "Weimar",         "Berlin-Charlottenburg",
                                                   "Rostock",        "Karlsruhe",
                                                   "Chemnitz",       "Breslau",
                                                   "Wiesbaden",      "Hannover",
                                                   "Mannheim",       "Kassel",
                                                   "K\xC3\xB6ln",    "Danzig",
                                                   "Erfurt",         "Dessau",
                                                   "Bremen",         "Charlottenburg",
                                                   "Magdeburg",      "Neuruppin",
                                                   "Darmstadt",      "Jena",
                                                   "Wien",           "Heidelberg",
                                                   "Dortmund",       "Stettin",
                                                   "Schwerin",       "Neubrandenburg",
                                                   "Greifswald",     "G\xC3\xB6ttingen",
                                                   "Braunschweig",   "Berliner",
                                                   "Warschau",       "Berlin-Spandau"};

const std::vector<std::string> kStuttgart10 = {
    "Karlsruhe", "Mannheim", "M\xC3\xBCnchen",    "Darmstadt", "Heidelberg",
    "Wiesbaden", "Kassel",   "D\xC3\xBCsseldorf", "Leipzig",   "Berlin"};

const std::vector<std::string> kAnalogyOrder = {"Deutschland",
                                                "Westdeutschland",
                                                "Sachsen",
                                                "Mitteldeutschland",
                                                "Brandenburg",
                                                "Polen",
                                                "Norddeutschland",
                                                "D\xC3\xA4nemark",
                                                "Schleswig-Holstein",
                                                "\xC3\x96sterreich",
                                                "Bayern",
                                                "Th\xC3\xBCringen",
                                                "Bundesrepublik",
                                                "Ostdeutschland",
                                                "Preu\xC3\x9F"
                                                "en",
                                                "Deutschen",
                                                "Hessen",
                                                "Potsdam",
                                                "Mecklenburg",
                                                "Niedersachsen",
                                                "Hamburg",
                                                "S\xC3\xBC"
                                                "ddeutschland",
                                                "Bremen",
                                                "Russland",
                                                "Deutschlands",
                                                "BRD",
                                                "Litauen",
                                                "Mecklenburg-Vorpommern",
                                                "DDR",
                                                "West-Berlin",
                                                "Saarland",
                                                "Lettland",
                                                "Hannover",
                                                "Rostock",
                                                "Sachsen-Anhalt",
                                                "Pommern",
                                                "Schweden",
                                                "Deutsche",
                                                "deutschen",
                                                "Westfalen"};

}  // namespace

TEST_SUITE("finalfusion") {
  TEST_CASE("nearest neighbours match the reference implementation") {
    for (const char* name : {"similarity.fifu", "similarity-normalized.fifu"}) {
      CAPTURE(name);
      auto e = Embeddings::open(ff_data(name));
      auto berlin = e.similar("Berlin", 40);
      REQUIRE(berlin);
      CHECK(words_of(*berlin) == kSimilarityOrder);
      for (std::size_t i = 1; i < berlin->size(); ++i)
        CHECK((*berlin)[i - 1].similarity >= (*berlin)[i].similarity);
      auto stuttgart = e.similar("Stuttgart", 10);
      REQUIRE(stuttgart);
      CHECK(words_of(*stuttgart) == kStuttgart10);
      // The query word is excluded; k larger than the vocabulary gives all others.
      auto all = e.similar("Berlin", 1000);
      CHECK(all->size() == 40);
      CHECK(e.similar("Berlin", 0)->empty());
      CHECK_FALSE(e.similar("Atlantis", 3));
    }
    auto w2v = read_word2vec_binary(modelzip::testing::ff_bytes("similarity.bin"));
    CHECK(words_of(*w2v.similar("Berlin", 40)) == kSimilarityOrder);
    CHECK(words_of(*w2v.similar("Stuttgart", 10)) == kStuttgart10);
    // Querying by vector: the word itself comes first (similarity 1).
    auto by_vector = w2v.similar_to(*w2v.embedding("Berlin"), 10);
    CHECK(by_vector[0].word == "Berlin");
    CHECK(by_vector[0].similarity == doctest::Approx(1.0f));
    std::vector<std::string> rest;
    for (std::size_t i = 1; i < by_vector.size(); ++i) rest.push_back(by_vector[i].word);
    CHECK(rest == std::vector<std::string>(kSimilarityOrder.begin(), kSimilarityOrder.begin() + 9));
    const std::string_view skip[] = {"Berlin", "Potsdam"};
    CHECK(w2v.similar_to(*w2v.embedding("Berlin"), 1, skip)[0].word == "Hamburg");
  }

  TEST_CASE("analogies match the reference implementation") {
    auto e = read_word2vec_binary(modelzip::testing::ff_bytes("analogy.bin"));
    auto result = e.analogy("Paris", "Frankreich", "Berlin", 40);
    REQUIRE(result);
    CHECK(words_of(*result) == kAnalogyOrder);
    CHECK_FALSE(e.analogy("Foo", "Frankreich", "Berlin", 40));
    CHECK_FALSE(e.analogy("Paris", "Foo", "Berlin", 40));
    CHECK_FALSE(e.analogy("Paris", "Frankreich", "Foo", 40));
  }

  TEST_CASE("the same vectors give the same queries, bit for bit, however they are stored") {
    // Rows kept as read (similarity.fifu, a conversion without normalizing)
    // were compared raw: similarities differed in the last bits from unit
    // rows with norms, and analogies differed outright (b - a + c of raw
    // vectors weighs each word by its length).
    for (const char* file : {"similarity.bin", "analogy.bin"}) {
      CAPTURE(file);
      const Bytes bytes = modelzip::testing::ff_bytes(file);
      const ConvertOptions raw_options{Utf8Policy::strict, false};
      const auto unit = read_word2vec_binary(bytes);
      const auto raw = read_word2vec_binary(bytes, raw_options);
      REQUIRE(unit.has_norms());
      REQUIRE_FALSE(raw.has_norms());
      std::vector<const Embeddings*> sources = {&unit, &raw};
      std::optional<Embeddings> fifu;
      if (std::string(file) == "similarity.bin") {
        fifu = Embeddings::open(ff_data("similarity.fifu"));  // the same rows, no norms
        sources.push_back(&*fifu);
      }
      auto same = [](const std::vector<WordSimilarity>& a, const std::vector<WordSimilarity>& b) {
        if (a.size() != b.size()) return false;
        for (std::size_t i = 0; i < a.size(); ++i)
          if (a[i].word != b[i].word || a[i].similarity != b[i].similarity) return false;
        return true;
      };
      const auto words = unit.vocab().words();
      for (std::size_t i = 0; i < words.size(); ++i) {
        const std::string w(words[i]);
        CAPTURE(w);
        const std::string b(words[(i + 1) % words.size()]), c(words[(i + 2) % words.size()]);
        for (const Embeddings* other : sources) {
          CHECK(*other->unit_embedding(w) == *unit.unit_embedding(w));
          CHECK(same(*other->similar(w, 100), *unit.similar(w, 100)));
          CHECK(same(*other->analogy(w, b, c, 100), *unit.analogy(w, b, c, 100)));
        }
      }
    }
  }

  TEST_CASE("fastText model: known and unknown words as finalfusion-rust's tests expect") {
    auto e = read_fasttext(modelzip::testing::ff_bytes("fasttext.bin"));
    // finalfusion-rust test_read_fasttext (epsilon 1e-6 there; the rounding
    // of the n-gram means differs in the last float bit between
    // implementations, numpy in float32 gives 0.551550 for "vor").
    auto uber = e.similar(
        "\xC3\xBC"
        "ber",
        3);
    REQUIRE(uber);
    CHECK(words_of(*uber) == std::vector<std::string>{"auf", "vor", "durch"});
    CHECK((*uber)[0].similarity == doctest::Approx(0.568513).epsilon(2e-6));
    CHECK((*uber)[1].similarity == doctest::Approx(0.551551).epsilon(2e-6));
    CHECK((*uber)[2].similarity == doctest::Approx(0.547349).epsilon(2e-6));
    auto unknown = e.similar("unknown", 3);
    REQUIRE(unknown);
    CHECK(words_of(*unknown) == std::vector<std::string>{"einer", "und", "des"});
    CHECK((*unknown)[0].similarity == doctest::Approx(0.691177).epsilon(2e-6));
    CHECK((*unknown)[1].similarity == doctest::Approx(0.576449).epsilon(2e-6));
    CHECK((*unknown)[2].similarity == doctest::Approx(0.570398).epsilon(2e-6));
  }

  TEST_CASE("batch lookup fills a caller buffer") {
    auto e = Embeddings::open(ff_data("ff_buckets.fifu"));
    const std::string_view words[] = {"one", "", "zwei", "</s>"};
    std::vector<float> out(4 * e.dims(), -1.0f);
    bool found[4];
    CHECK(e.embeddings_into(words, out, found) == 3);
    CHECK(found[0]);
    CHECK_FALSE(found[1]);
    CHECK(found[2]);
    CHECK(found[3]);
    for (std::size_t i = 0; i < e.dims(); ++i) {
      CHECK(out[i] == (*e.embedding("one"))[i]);
      CHECK(out[e.dims() + i] == 0.0f);
      CHECK(out[2 * e.dims() + i] == (*e.embedding("zwei"))[i]);
    }
    std::vector<float> small(3);
    CHECK_THROWS_AS(e.embeddings_into(words, small), Error);
    CHECK_THROWS_AS(e.embedding_into("one", small), Error);
  }

  TEST_CASE("queries are safe to run concurrently") {
    auto e = Embeddings::open(ff_data("similarity.fifu"));
    std::vector<std::thread> threads;
    std::vector<int> ok(4, 0);
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 20; ++i)
          ok[t] += words_of(*e.similar("Berlin", 40)) == kSimilarityOrder;
      });
    for (auto& t : threads) t.join();
    CHECK(ok == std::vector<int>(4, 20));
  }
}
