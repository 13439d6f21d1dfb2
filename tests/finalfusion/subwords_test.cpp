// N-gram extraction and the subword hash functions, against values computed
// independently: the finalfusion-rust test suite's published bucket numbers
// and a small Python implementation of FNV-1a / murmurhash3
// (/usr/bin/python3, recorded in the comments).
#include <doctest/doctest.h>

#include <algorithm>

#include "ff_test_support.hpp"
#include "finalfusion/subwords.hpp"

using namespace modelzip::finalfusion;

TEST_SUITE("finalfusion") {
  TEST_CASE("n-grams are code-point substrings in reference order") {
    // Python: [s[i:i+n] for i in range(len(s)) for n in range(min(6,len(s)-i),2,-1)]
    const std::vector<std::string> expected = {
        "<Dani\xC3\xAB", "<Dani",      "<Dan",         "<Da",           "Dani\xC3\xABl",
        "Dani\xC3\xAB",  "Dani",       "Dan",          "ani\xC3\xABl>", "ani\xC3\xABl",
        "ani\xC3\xAB",   "ani",        "ni\xC3\xABl>", "ni\xC3\xABl",   "ni\xC3\xAB",
        "i\xC3\xABl>",   "i\xC3\xABl", "\xC3\xABl>"};
    CHECK(ngrams("<Dani\xC3\xABl>", 3, 6) == expected);
    // finalfusion-rust's short_ngram_test: a word shorter than max_n gives
    // the whole word too.
    auto yep = ngrams("\xCB\x88j\xC9\x99p", 3, 6);  // "ˈjəp"
    std::sort(yep.begin(), yep.end());
    std::vector<std::string> yep_expected = {"\xCB\x88j\xC9\x99", "\xCB\x88j\xC9\x99p",
                                             "j\xC9\x99p"};
    std::sort(yep_expected.begin(), yep_expected.end());
    CHECK(yep == yep_expected);
    CHECK(ngrams("", 1, 3).empty());
    CHECK(ngrams("ab", 3, 6).empty());
    CHECK_THROWS_AS(ngrams("abc", 0, 3), modelzip::Error);
    CHECK_THROWS_AS(ngrams("abc", 4, 3), modelzip::Error);
  }

  TEST_CASE("finalfusion bucket hash: FNV-1a 64 over char count and code points") {
    // Published in finalfusion-rust's subword tests (bucket exponent 21),
    // and reproduced with Python:
    //   fnv1a64(struct.pack('<Q', len(g)) + b''.join(struct.pack('<I', ord(c)) for c in g))
    CHECK(finalfusion_bucket("Dan", 21) == 214157);
    CHECK(finalfusion_bucket("i\xC3\xABl", 21) == 233912);  // "iël"
    CHECK(finalfusion_bucket("<Da", 21) == 2026735);
    CHECK(finalfusion_bucket("ani\xC3\xABl>", 21) == 1693100);
    CHECK(finalfusion_bucket("<hallo", 21) == 1321513);
    CHECK(finalfusion_bucket("lo>", 21) == 75867);
    // Full 64-bit hashes from Python.
    CHECK(finalfusion_bucket("Dan", 64) == 0x2adadd778323448dull);
    CHECK(finalfusion_bucket("i\xC3\xABl", 64) == 0x8721752a09e391b8ull);
    CHECK(finalfusion_bucket("Dan", 0) == 0);
  }

  TEST_CASE("fastText hash: FNV-1a 32 over sign-extended bytes") {
    // Python: x ^= (c - 256 if c >= 128 else c) & 0xffffffff; x = x * 16777619 % 2**32
    CHECK(fasttext_hash("") == 2166136261u);
    CHECK(fasttext_hash("abc") == 440920331u);
    CHECK(fasttext_hash("<\xC3\xBC"
                        "ber>") == 1478820905u);  // "<über>"
    CHECK(fasttext_hash("\xC3\xBC"
                        "be") == 924255527u);  // "übe"
    CHECK(fasttext_hash("<\xC3\xBC") == 990811388u);
    CHECK(fasttext_bucket("ber>", 100) == 56);
    CHECK(fasttext_bucket("<\xC3\xBC", 100) == 88);
  }

  TEST_CASE("fastText vocabularies skip the bracket 1-grams, as fastText's computeSubwords") {
    // "<ab>" with n = 1..2, by start, longest first: "<a" "<" | "ab" "a" |
    // "b>" "b" | ">". fastText drops "<" and ">" (1-grams touching a bracket).
    auto ft = Vocab::fasttext_subwords({"x"}, 1, 2, 1000);
    std::vector<std::uint64_t> expected;
    for (const char* g : {"<a", "ab", "a", "b>", "b"})
      expected.push_back(1 + fasttext_bucket(g, 1000));
    CHECK(ft.subword_rows("ab") == expected);
    // A '<' inside the word is an ordinary character.
    auto ft1 = Vocab::fasttext_subwords({}, 1, 1, 1000);
    CHECK(ft1.subword_rows("a<b") == std::vector<std::uint64_t>{fasttext_bucket("a", 1000),
                                                                fasttext_bucket("<", 1000),
                                                                fasttext_bucket("b", 1000)});
    // finalfusion buckets keep every n-gram, brackets included.
    auto ff = Vocab::bucket_subwords({}, 1, 1, 20);
    CHECK(ff.subword_rows("a") == std::vector<std::uint64_t>{finalfusion_bucket("<", 20),
                                                             finalfusion_bucket("a", 20),
                                                             finalfusion_bucket(">", 20)});
  }

  TEST_CASE("murmurhash3 x64 128 matches the published reference vectors") {
    using detail::murmur3_x64_128;
    // Vectors published for MurmurHash3_x64_128 (seed 0).
    CHECK(murmur3_x64_128("", 0)[0] == 0);
    CHECK(murmur3_x64_128("hello", 0)[0] == 0xcbd8a7b341bd9b02ull);
    CHECK(murmur3_x64_128("hello", 0)[1] == 0x5b1e906a48ae1d19ull);
    const auto fox = murmur3_x64_128("The quick brown fox jumps over the lazy dog", 0);
    CHECK(fox[0] == 0xe34bbc7bbc071b6cull);
    CHECK(fox[1] == 0x7a433ca9c49a9347ull);
  }

  TEST_CASE("floret buckets: four u32 words of the murmur3 hash, mod buckets") {
    // Python (mm3.py, checked against the reference vectors above), seed
    // 2166136261: words32('<,>') = [4103120041, 1685945767, 2047186997, 1997192735]
    CHECK(floret_buckets("<,>", 1ull << 40, 4, 2166136261u) ==
          std::vector<std::uint64_t>{4103120041u, 1685945767u, 2047186997u, 1997192735u});
    CHECK(floret_buckets("<,>", 10, 2, 2166136261u) == std::vector<std::uint64_t>{1, 7});
    // "über": [4223525188, 3326046326, 901689158, 1066209231]
    CHECK(floret_buckets("\xC3\xBC"
                         "ber",
                         1000, 3, 2166136261u) == std::vector<std::uint64_t>{188, 326, 158});
  }

  TEST_CASE("vocabularies map words and n-grams to rows") {
    auto v = Vocab::bucket_subwords({"one", "two"}, 3, 6, 21);
    CHECK(v.rows() == 2 + (1ull << 21));
    CHECK(v.word_index("two") == 1u);
    CHECK_FALSE(v.word_index("three"));
    auto rows = v.subword_rows("Dani\xC3\xABl");
    REQUIRE(rows.size() == 18);
    std::sort(rows.begin(), rows.end());
    // finalfusion-rust SUBWORD_TESTS_21 for "<Daniël>", plus 2 words.
    const std::vector<std::uint64_t> published = {
        214157,  233912,  311961,  488897,  620206,  741276,  841219,  1167494, 1192256,
        1489905, 1532271, 1644730, 1666166, 1679745, 1680294, 1693100, 2026735, 2065822};
    for (std::size_t i = 0; i < rows.size(); ++i) CHECK(rows[i] == published[i] + 2);

    auto e = Vocab::explicit_ngrams({"this", "is", "a", "test"}, 2, 3,
                                    {{"is>", 7}, {"is", 9}, {"<t", 7}});
    CHECK(e.rows() == 4 + 2);  // indices 7 and 9 renumbered to 0 and 1
    CHECK(e.ngram_indices()[0] == 0);
    CHECK(e.ngram_indices()[1] == 1);
    CHECK(e.ngram_indices()[2] == 0);
    // "<is>": n-grams "<is", "<i", "is>", "is", "s>": only "is>" and "is" known.
    auto is_rows = e.subword_rows("is");
    std::sort(is_rows.begin(), is_rows.end());
    CHECK(is_rows == std::vector<std::uint64_t>{4, 5});
    CHECK(e.subword_rows("xyz").empty());

    auto f = Vocab::floret(2, 3, 10, 2, 2166136261u);
    auto groups = f.ngram_rows(",");
    // Whole word "<,>" first, then n-grams "<,>", "<,", ",>".
    REQUIRE(groups.size() == 4);
    CHECK(groups[0].first == "<,>");
    CHECK(groups[0].second == std::vector<std::uint64_t>{1, 7});
    CHECK(groups[1].first == "<,>");
    CHECK(groups[2].first == "<,");
    CHECK(groups[3].first == ",>");

    CHECK_THROWS_AS(Vocab::simple({"a", "a"}), modelzip::Error);
    CHECK_THROWS_AS(Vocab::simple({"\xC3"}), modelzip::Error);
    CHECK_THROWS_AS(Vocab::bucket_subwords({}, 0, 3, 10), modelzip::Error);
    CHECK_THROWS_AS(Vocab::floret(3, 6, 10, 5, 0), modelzip::Error);
    CHECK_THROWS_AS(Vocab::explicit_ngrams({}, 3, 6, {{"abc", 1}, {"abc", 2}}), modelzip::Error);
  }
}
