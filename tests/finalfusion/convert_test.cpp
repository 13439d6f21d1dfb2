// Converters: word2vec binary, text with and without dims, fastText, floret
// text. Expected values come from the files' raw bytes (numpy) and from the
// finalfusion-rust test suite.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>

#include "core/utf8.hpp"
#include "ff_test_support.hpp"
#include "modelzip/finalfusion/convert.hpp"
#include "source_naming.hpp"

using namespace modelzip;
using namespace modelzip::finalfusion;
using modelzip::testing::check_errors_name_source;
using modelzip::testing::ff_bytes;
using modelzip::testing::ff_data;
using modelzip::testing::SourceReader;

namespace {

const ConvertOptions kRaw{Utf8Policy::strict, false};
const ConvertOptions kLossy{Utf8Policy::lossy, true};

std::vector<std::string> word_list(const Embeddings& e) {
  return {e.vocab().words().begin(), e.vocab().words().end()};
}

// The spaCy floret example used by finalfusion-rust's floret tests.
const char* kFloret =
    "10 10 2 3 2 2166136261 < >\n"
    "0 -2.2611 3.9302 2.6676 -11.233 0.093715 -10.52 -9.6463 -0.11853 2.101 -0.10145\n"
    "1 -3.12 -1.7981 10.7 -6.171 4.4527 10.967 9.073 6.2056 -6.1199 -2.0402\n"
    "2 9.5689 5.6721 -8.4832 -1.2249 2.1871 -3.0264 -2.391 -5.3308 -3.2847 -4.0382\n"
    "3 3.6268 4.2759 -1.7007 1.5002 5.5266 1.8716 -12.063 0.26314 2.7645 2.4929\n"
    "4 -11.683 -7.7068 2.1102 2.214 7.2202 0.69799 3.2173 -5.382 -2.0838 5.0314\n"
    "5 -4.3024 8.0241 2.0714 -1.0174 -0.28369 1.7622 7.8797 -1.7795 6.7541 5.6703\n"
    "6 8.3574 -5.225 8.6529 8.5605 -8.9465 3.767 -5.4636 -1.4635 -0.98947 -0.58025\n"
    "7 -10.01 3.3894 -4.4487 1.1669 -11.904 6.5158 4.3681 0.79913 -6.9131 -8.687\n"
    "8 -5.4576 7.1019 -8.8259 1.7189 4.955 -8.9157 -3.8905 -0.60086 -2.1233 5.892\n"
    "9 8.0678 -4.4142 3.6236 4.5889 -2.7611 2.4455 0.67096 -4.2822 2.0875 4.6274\n";

// floret's own vectors for these words (the spaCy check file).
const char* kFloretCheck =
    "10 10\n"
    ", -5.7814 2.6918 0.57029 -3.6985 -2.7079 1.4406 1.0084 1.7463 -3.8625 -3.0565\n"
    ". 3.8016 -1.759 0.59118 3.3044 -0.72975 0.45221 -2.1412 -3.8933 -2.1238 -0.47409\n"
    "der 0.08224 2.6601 -1.173 1.1549 -0.42821 -0.097268 -2.5589 -1.609 -0.16968 0.84687\n"
    "die -2.8781 0.082576 1.9286 -0.33279 0.79488 3.36 3.5609 -0.64328 -2.4152 0.17266\n"
    "und 2.1558 1.8606 -1.382 0.45424 -0.65889 1.2706 0.5929 -2.0592 -2.6949 -1.6015\n"
    "\" -1.1242 1.4588 -1.6263 1.0382 -2.7609 -0.99794 -0.83478 -1.5711 -1.2137 1.0239\n"
    "in -0.87635 2.0958 4.0018 -2.2473 -1.2429 2.3474 1.8846 0.46521 -0.506 -0.26653\n"
    "von -0.10589 1.196 1.1143 -0.40907 -1.0848 -0.054756 -2.5016 -1.0381 -0.41598 0.36982\n"
    "( 0.59263 2.1856 0.67346 1.0769 1.0701 1.2151 1.718 -3.0441 2.7291 3.719\n"
    ") 0.13812 3.3267 1.657 0.34729 -3.5459 0.72372 0.63034 -1.6145 1.2733 0.37798\n";

}  // namespace

TEST_SUITE("finalfusion") {
  TEST_CASE("word2vec binary: read raw, read normalised, write back byte for byte") {
    const Bytes original = ff_bytes("similarity.bin");
    auto raw = read_word2vec_binary(original, kRaw);
    CHECK(raw.vocab().words_len() == 41);
    CHECK(raw.dims() == 100);
    CHECK_FALSE(raw.has_norms());
    // numpy: the first row starts at byte 14 ("41 100\nBerlin ").
    CHECK(raw.matrix()[0] == 1.4724286794662476f);
    std::ostringstream out;
    write_word2vec_binary(out, raw);
    CHECK(out.str() == std::string(original.as_string_view()));
    // Normalised: unit rows, norms kept; un-normalising restores the rows.
    auto normalized = read_word2vec_binary(original);
    REQUIRE(normalized.has_norms());
    CHECK(modelzip::testing::l2(*normalized.embedding("Berlin")) == doctest::Approx(1.0f));
    std::ostringstream restored;
    write_word2vec_binary(restored, normalized);
    auto again = read_word2vec_binary(Bytes::copy_of(restored.str()), kRaw);
    for (std::size_t i = 0; i < raw.matrix().size(); ++i)
      REQUIRE(again.matrix()[i] == doctest::Approx(raw.matrix()[i]).epsilon(1e-5));
    // The same embeddings as the finalfusion file made from them.
    auto fifu = Embeddings::open(ff_data("similarity.fifu"));
    CHECK(fifu.vocab() == raw.vocab());
    CHECK(std::equal(fifu.matrix().begin(), fifu.matrix().end(), raw.matrix().begin(),
                     raw.matrix().end()));
  }

  TEST_CASE(
      "WriteOptions::normalize has ConvertOptions::normalize's polarity; 0.1's bool keeps "
      "its meaning") {
    // Normalized on reading (unit rows, norms kept): written with the
    // default options, the original vectors come back; with normalize, the
    // unit rows as stored. 0.1's `bool unnormalize` still means that.
    const auto e = read_text(Bytes::copy_of(std::string("a 0 2\nb 4 0\n")));
    REQUIRE(e.has_norms());
    std::ostringstream original, unit;
    write_text(original, e);
    write_text(unit, e, {.normalize = true});
    CHECK(original.str() == "a 0 2\nb 4 0\n");
    CHECK(unit.str() == "a 0 1\nb 1 0\n");
    const auto raw = read_text(Bytes::copy_of(original.str()), {.normalize = false});
    CHECK_FALSE(raw.has_norms());
    std::ostringstream raw_out;
    write_text(raw_out, raw, {.normalize = true});  // no norms: the rows as read
    CHECK(raw_out.str() == original.str());
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    for (const bool unnormalize : {true, false}) {
      std::ostringstream old_text, old_dims, old_binary, new_text, new_dims, new_binary;
      write_text(old_text, e, unnormalize);
      write_text_dims(old_dims, e, unnormalize);
      write_word2vec_binary(old_binary, e, unnormalize);
      write_text(new_text, e, {.normalize = !unnormalize});
      write_text_dims(new_dims, e, {.normalize = !unnormalize});
      write_word2vec_binary(new_binary, e, {.normalize = !unnormalize});
      CHECK(old_text.str() == (unnormalize ? original : unit).str());
      CHECK(old_text.str() == new_text.str());
      CHECK(old_dims.str() == new_dims.str());
      CHECK(old_binary.str() == new_binary.str());
    }
#pragma GCC diagnostic pop
  }

  TEST_CASE("word2vec binary: a row that cannot be normalized is refused at its offset") {
    auto file = [](float x) {
      std::string s = "2 2\nok ";
      const float ok[2] = {3, 4};
      s.append(reinterpret_cast<const char*>(ok), 8);
      s += "\nbad ";
      const float bad[2] = {1, x};
      s.append(reinterpret_cast<const char*>(bad), 8);
      return s + "\n";
    };
    for (const float x :
         {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
      CAPTURE(x);
      try {
        (void)read_word2vec_binary(Bytes::copy_of(file(x)), {}, "v.bin");
        FAIL("accepted");
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::corrupt);
        CHECK(e.context().archive == "v.bin");
        CHECK(e.context().offset == 4 + 3 + 8 + 1 + 4 + 4);  // the second float of "bad"
        CHECK_MESSAGE(e.message().find("row 1 ('bad'): component 2 is") != std::string::npos,
                      e.message());
      }
      // Without normalizing the row is kept as it is.
      auto raw = read_word2vec_binary(Bytes::copy_of(file(x)), kRaw);
      CHECK(std::memcmp(&raw.matrix()[3], &x, 4) == 0);
    }
  }

  TEST_CASE("word2vec binary: a repeated word is refused at the offset of its second occurrence") {
    std::string file = "3 1\n";
    std::uint64_t second = 0;
    for (std::string_view word : {"a", "bb", "a"}) {
      if (word == "a" && file.size() > 4) second = file.size();
      file += word;
      file += ' ';
      const float one = 1.0f;
      file.append(reinterpret_cast<const char*>(&one), 4);
      file += '\n';
    }
    try {
      (void)read_word2vec_binary(Bytes::copy_of(file));
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::corrupt);
      CHECK(e.context().offset == second);
      CHECK_MESSAGE(e.message().find("words 0 and 2 are both 'a'") != std::string::npos,
                    e.message());
    }
  }

  TEST_CASE("word2vec binary: a text file read as binary is said to be text") {
    // Text vectors named .bin (or --format word2vec on a text file) were read
    // as garbage floats until "words 10 and 15 are both ''".
    try {
      read_word2vec_binary(ff_bytes("similarity.txt"));
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::corrupt);
      CHECK(e.context().offset == std::string_view("41 100\nBerlin ").size());
      CHECK_MESSAGE(e.message().starts_with("word2vec row 0 ('Berlin'): its vector is text "
                                            "('1.4724287 -3.0660472 1.2...'), not binary "
                                            "floats: a word2vec text file?"),
                    e.message());
    }
  }

  TEST_CASE("text with and without dims equals the word2vec file and writes back identically") {
    auto w2v = read_word2vec_binary(ff_bytes("similarity.bin"), kRaw);
    const Bytes dims_text = ff_bytes("similarity.txt");
    const Bytes plain_text = ff_bytes("similarity.nodims");
    auto with_dims = read_text_dims(dims_text, kRaw);
    auto without = read_text(plain_text, kRaw);
    for (const auto* e : {&with_dims, &without}) {
      CHECK(e->vocab() == w2v.vocab());
      CHECK(std::equal(e->matrix().begin(), e->matrix().end(), w2v.matrix().begin(),
                       w2v.matrix().end()));
    }
    std::ostringstream a, b;
    write_text_dims(a, with_dims);
    write_text(b, without);
    CHECK(a.str() == std::string(dims_text.as_string_view()));
    CHECK(b.str() == std::string(plain_text.as_string_view()));
  }

  TEST_CASE("word2vec header of another format: the quoted bytes are escaped and whole") {
    // A fastText model read as word2vec: its magic number has invalid UTF-8
    // and a NUL byte within the first token.
    try {
      read_word2vec_binary(ff_bytes("fasttext.bin"));
      FAIL("a fastText model read as word2vec");
    } catch (const Error& e) {
      const std::string message = e.what();
      CHECK(e.code() == ErrorCode::corrupt);
      CHECK(e.context().offset == 0u);
      CHECK(modelzip::detail::utf8_valid(message));
      CHECK(message.find('\0') == std::string::npos);
      // Control characters too, as the CLI shows them (Error's messages are printable).
      CHECK(message.find("'\\xba\\x16O/\\x0c' is not a number") != std::string::npos);
    }
  }

  TEST_CASE("words the word2vec and text readers would not give back are refused before writing") {
    // finalfusion vocabularies hold any string; these formats end a word at
    // whitespace (word2vec: at a space, then trim it).
    const auto embeddings = [](std::string word) {
      return Embeddings::from_matrix(Vocab::simple({"ok", std::move(word)}), {1, 2, 3, 4}, 2);
    };
    for (const std::string word : {"New York", "", "tab\there", "cr\r", "\nlead"}) {
      std::ostringstream out;
      try {
        write_text(out, embeddings(word));
        FAIL("written to text: " << word);
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::invalid_argument);
        CHECK(std::string(e.what()).starts_with("word 1 '"));
      }
      CHECK(out.str().empty());  // nothing written
      std::ostringstream dims;
      CHECK_THROWS_AS(write_text_dims(dims, embeddings(word)), Error);
      CHECK(dims.str().empty());
    }
    for (const std::string word : {"New York", " lead", "trail\n", "ideographic\u3000"}) {
      std::ostringstream out;
      CHECK_THROWS_AS(write_word2vec_binary(out, embeddings(word)), Error);
      CHECK(out.str().empty());
    }
    // What the readers keep: inner tabs and Unicode spaces (word2vec), and
    // no-break or ideographic spaces (text).
    for (const std::string word : {"a\tb", "", "a\u00a0b"}) {
      std::ostringstream out;
      write_word2vec_binary(out, embeddings(word));
      CHECK(word_list(read_word2vec_binary(Bytes::copy_of(out.str()), kRaw))[1] == word);
    }
    for (const std::string word : {"a\u00a0b", "a\u3000"}) {
      std::ostringstream out;
      write_text(out, embeddings(word));
      CHECK(word_list(read_text(Bytes::copy_of(out.str()), kRaw))[1] == word);
    }
  }

  TEST_CASE("values that are not finite are refused before writing word2vec and text") {
    // They were written ("NaN", "inf"): fastText's .vec reader (C++ stream
    // extraction) does not parse them and silently reads that and every later
    // vector wrong, and import refuses such rows by default.
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    using Writer = std::function<void(std::ostream&, const Embeddings&, const WriteOptions&)>;
    const std::vector<Writer> writers = {
        [](std::ostream& o, const Embeddings& e, const WriteOptions& w) { write_text(o, e, w); },
        [](std::ostream& o, const Embeddings& e, const WriteOptions& w) {
          write_text_dims(o, e, w);
        },
        [](std::ostream& o, const Embeddings& e, const WriteOptions& w) {
          write_word2vec_binary(o, e, w);
        }};
    auto refused = [&](const Embeddings& e, bool normalize, const std::string& says) {
      for (const auto& write : writers) {
        std::ostringstream out;
        try {
          write(out, e, WriteOptions{.normalize = normalize});
          FAIL("written");
        } catch (const Error& error) {
          CHECK(error.code() == ErrorCode::invalid_argument);
          CHECK_MESSAGE(error.message().starts_with(says), error.message());
          CHECK(error.message().find("a .fifu file holds any value") != std::string::npos);
        }
        CHECK(out.str().empty());  // nothing written
      }
    };
    for (const float bad : {nan, inf, -inf}) {
      std::string shown = bad != bad ? "NaN" : bad > 0 ? "inf" : "-inf";
      auto e = Embeddings::from_matrix(Vocab::simple({"ok", "bad"}), {1, 2, 3, bad}, 2);
      refused(e, false, "row 1 ('bad'): component 2 is " + shown + ",");
      refused(e, true, "row 1 ('bad'): component 2 is " + shown + ",");
    }
    // Finite unit rows times a norm that is not (finalfusion-rust stores the
    // norm inf for a row with an infinite component): refused when
    // unnormalizing, written as stored with normalize = true.
    auto e = Embeddings::from_matrix(Vocab::simple({"ok", "big"}), {0.6f, 0.8f, 0.0f, 1.0f}, 2,
                                     std::vector<float>{5.0f, inf});
    refused(e, false, "row 1 ('big'): component 1 (the stored 0 times the row's norm inf) is NaN,");
    for (const auto& write : writers) {
      std::ostringstream out;
      write(out, e, WriteOptions{.normalize = true});
      CHECK_FALSE(out.str().empty());
    }
    std::ostringstream out;
    write_text(out, e, WriteOptions{.normalize = true});
    CHECK(out.str() == "ok 0.6 0.8\nbig 0 1\n");
  }

  TEST_CASE("invalid UTF-8 tokens: rejected, or replaced as the reference tools do") {
    const std::vector<std::string> expected = {"meren", "zee\xEF\xBF\xBDn", "rivieren"};
    CHECK(word_list(read_word2vec_binary(ff_bytes("utf8-incomplete.bin"), kLossy)) == expected);
    CHECK(word_list(read_text(ff_bytes("utf8-incomplete.txt"), kLossy)) == expected);
    CHECK(word_list(read_text_dims(ff_bytes("utf8-incomplete.dims"), kLossy)) == expected);
    try {
      read_word2vec_binary(ff_bytes("utf8-incomplete.bin"));
      FAIL("invalid UTF-8 accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::corrupt);
      CHECK(e.context().offset == 26u);  // "3 3\nmeren " + 12 bytes + "\nzee" -> 0xBF
    }
    try {
      read_text(ff_bytes("utf8-incomplete.txt"));
      FAIL("invalid UTF-8 accepted");
    } catch (const Error& e) {
      CHECK(e.context().line == 2u);
    }
    try {
      read_text_dims(ff_bytes("utf8-incomplete.dims"));
      FAIL("invalid UTF-8 accepted");
    } catch (const Error& e) {
      CHECK(e.context().line == 3u);
    }
    // The vectors: "meren -1 0 1" normalised.
    auto e = read_text(ff_bytes("utf8-incomplete.txt"), kLossy);
    CHECK((*e.embedding("meren"))[0] == doctest::Approx(-0.70710678));
    CHECK(*e.norm("meren") == doctest::Approx(1.41421356));
  }

  TEST_CASE("text format errors name the line") {
    auto fails_at = [](const char* text, bool dims, std::optional<std::uint64_t> line) {
      CAPTURE(text);
      try {
        if (dims)
          read_text_dims(Bytes::copy_of(std::string_view(text)));
        else
          read_text(Bytes::copy_of(std::string_view(text)));
        FAIL("accepted");
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::corrupt);
        CHECK(e.context().line == line);
      }
    };
    fails_at("a 1 2\nb 1\n", false, 2);
    fails_at("a 1 2\n\nb 1 2\n", false, 2);
    fails_at("a 1 x\n", false, 1);
    fails_at("", false, 1);  // no word at all
    fails_at("2 2\na 1 2\n", true, 2);
    fails_at("2 3\na 1 2\nb 1 2\n", true, 2);
    fails_at("two 2\na 1 2\n", true, 1);
    // A repeated word: the line of its second occurrence.
    fails_at("2 2\na 1 2\na 3 4\n", true, 3);
    fails_at("a 1 2\nb 3 4\nc 5 6\nb 7 8\n", false, 4);
    // Tabs, CR and extra spaces separate fields; '+' and exponents parse.
    auto e = read_text(Bytes::copy_of(std::string_view("w\t+1.5  -2e1 \r\n")), kRaw);
    CHECK(e.matrix()[0] == 1.5f);
    CHECK(e.matrix()[1] == -20.0f);
  }

  TEST_CASE(
      "text files that start with a UTF-8 byte order mark: the mark is not part of the word") {
    // Windows editors (Notepad, Excel's "UTF-8 CSV") write U+FEFF first.
    const std::string bom = "\xEF\xBB\xBF";
    const std::string glove = "Berlin 3 4\nParis 1 0\n";
    auto plain = read_text(Bytes::copy_of(glove), kRaw);
    auto marked = read_text(Bytes::copy_of(bom + glove), kRaw);
    CHECK(word_list(marked) == word_list(plain));
    CHECK(marked.vocab().word_index("Berlin") == 0);
    auto dims = read_text_dims(Bytes::copy_of(bom + "2 2\n" + glove), kRaw);
    CHECK(word_list(dims) == word_list(plain));
    CHECK(std::equal(dims.matrix().begin(), dims.matrix().end(), plain.matrix().begin(),
                     plain.matrix().end()));
    // The dims line is recognized behind the mark.
    CHECK(detect_embedding_format("v.vec", bom + "2 2\nBerlin 3 4\n") ==
          EmbeddingFormat::text_dims);
    CHECK(detect_embedding_format("v.txt", bom + "Berlin 3 4\n") == EmbeddingFormat::text);
    auto floret = read_floret_text(Bytes::copy_of(bom + kFloret));
    auto floret_plain = read_floret_text(Bytes::copy_of(std::string_view(kFloret)));
    CHECK(std::equal(floret.matrix().begin(), floret.matrix().end(), floret_plain.matrix().begin(),
                     floret_plain.matrix().end()));
    // Only at the start: elsewhere U+FEFF is a character of the word.
    auto inner = read_text(Bytes::copy_of(glove + bom + "Rom 2 2\n"), kRaw);
    CHECK(word_list(inner).back() == bom + "Rom");
  }

  TEST_CASE("text: NaN and infinities are read as finalfusion-rust reads them, kept by .fifu") {
    // Rust's f32 parse (finalfusion-rust's reader): "NaN", "inf", "infinity",
    // any case, with a sign; not C's "nan(...)".
    const std::string text = "a NaN inf -inf 1.5\nb nan -Infinity +INF -NaN\n";
    auto raw = read_text(Bytes::copy_of(text), kRaw);
    const std::vector<float> m(raw.matrix().begin(), raw.matrix().end());
    REQUIRE(m.size() == 8);
    const float inf = std::numeric_limits<float>::infinity();
    CHECK(std::isnan(m[0]));
    CHECK(m[1] == inf);
    CHECK(m[2] == -inf);
    CHECK(m[3] == 1.5f);
    CHECK(std::isnan(m[4]));
    CHECK(m[5] == -inf);
    CHECK(m[6] == inf);
    CHECK(std::isnan(m[7]));
    // A finalfusion file keeps them; the word2vec and text writers refuse
    // them (see "values that are not finite are refused before writing").
    {
      auto again = Embeddings::read(raw.to_bytes());
      REQUIRE(again.matrix().size() == m.size());
      for (std::size_t i = 0; i < m.size(); ++i) {
        INFO(i);
        if (std::isnan(m[i]))
          CHECK(std::isnan(again.matrix()[i]));
        else
          CHECK(again.matrix()[i] == m[i]);
      }
    }
    // Normalizing (the default) refuses such a row, naming the line and the
    // column, rather than storing NaN (finalfusion-rust stores NaN there).
    auto refused_at = [](const std::string& file, bool dims, std::uint64_t line,
                         const std::string& says) {
      CAPTURE(file);
      try {
        (void)(dims ? read_text_dims(Bytes::copy_of(file), {}, "v.txt")
                    : read_text(Bytes::copy_of(file), {}, "v.txt"));
        FAIL("accepted");
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::corrupt);
        CHECK(e.context().archive == "v.txt");
        CHECK(e.context().line == line);
        CHECK_MESSAGE(e.message().find(says) != std::string::npos, e.message());
        CHECK(e.message().find("--no-normalize") != std::string::npos);
      }
    };
    refused_at("b 1 2\na NaN 1\n", false, 2, "column 3: component 1 of word 'a' is 'NaN'");
    refused_at("a 1 inf\n", false, 1, "column 5: component 2 of word 'a' is 'inf'");
    refused_at("2 2\nb 1 2\na\t-Infinity 1\n", true, 3, "column 3: component 1 of word 'a'");
    refused_at("a 1 1e39\n", false, 1, "column 5: component 2 of word 'a' is '1e39'");
    // A byte-order mark is 3 bytes of line 1; it moves no other line.
    const std::string bom = "\xEF\xBB\xBF";
    refused_at(bom + "a 1 inf\n", false, 1, "column 8: component 2 of word 'a' is 'inf'");
    refused_at(bom + "a 1 2\nb 1 inf\n", false, 2, "column 5: component 2 of word 'b'");
    // Columns count bytes of the file, also when the word was escaped.
    {
      ConvertOptions escape;
      escape.utf8 = Utf8Policy::escape;
      try {
        (void)read_text(Bytes::copy_of(std::string("caf\xe9 1 nan\n")), escape);
        FAIL("accepted");
      } catch (const Error& e) {
        CHECK_MESSAGE(e.message().find("column 8: component 2") != std::string::npos, e.message());
      }
    }
    // Strict decoding names the column of the first invalid byte, the mark counted.
    try {
      (void)read_text(Bytes::copy_of(bom + "caf\xe9 1\n"), {});
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.context().line == 1);
      CHECK_MESSAGE(e.message().find("column 7: word 'caf\\xe9'") != std::string::npos,
                    e.message());
    }
    // Finite components whose norm is beyond float32's range: refused too.
    refused_at("a 3e38 3e38\n", false, 1, "word 'a': its norm 4.24e+38 is beyond float32's range");
    // Huge and tiny finite rows are normalized exactly (their squares
    // overflow or underflow float32), and export gives them back.
    auto extreme = read_text(Bytes::copy_of(std::string("big 3e30 4e30\ntiny 3e-30 4e-30\n")));
    REQUIRE(extreme.has_norms());
    CHECK(extreme.matrix()[0] == doctest::Approx(0.6));
    CHECK(extreme.matrix()[1] == doctest::Approx(0.8));
    CHECK(extreme.matrix()[2] == doctest::Approx(0.6));
    CHECK(extreme.matrix()[3] == doctest::Approx(0.8));
    CHECK(extreme.norms()[0] == doctest::Approx(5e30));
    CHECK(extreme.norms()[1] == doctest::Approx(5e-30));
    // Out of f32's range: an infinity or 0, as Rust rounds.
    auto range = read_text(Bytes::copy_of(std::string("a 1e39 -1e39 1e-50\n")), kRaw);
    CHECK(range.matrix()[0] == inf);
    CHECK(range.matrix()[1] == -inf);
    CHECK(range.matrix()[2] == 0.0f);
    for (const char* refused : {"a nan(1) 2\n", "a in 2\n", "a NaNa 2\n", "a ++inf 2\n"}) {
      INFO(refused);
      CHECK_THROWS_AS(read_text(Bytes::copy_of(std::string(refused)), kRaw), Error);
    }
  }

  TEST_CASE("fastText: word vectors as fastText computes them, subword buckets kept") {
    auto e = read_fasttext(ff_bytes("fasttext.bin"));
    CHECK(e.vocab().kind() == VocabKind::fasttext_subwords);
    CHECK(e.vocab().words_len() == 157);
    CHECK(e.vocab().n_buckets() == 100);
    CHECK(e.vocab().min_n() == 3);
    CHECK(e.vocab().max_n() == 6);
    CHECK(e.rows() == 257);
    CHECK(e.dims() == 50);
    CHECK(e.vocab().words()[0] == "</s>");
    // numpy (expect3.py): mean of the word row and its fastText n-gram rows,
    // normalised.
    auto uber = *e.embedding(
        "\xC3\xBC"
        "ber");
    CHECK(uber[0] == doctest::Approx(0.37440621852874756).epsilon(1e-5));
    CHECK(uber[1] == doctest::Approx(0.19291874766349792).epsilon(1e-5));
    CHECK(uber[2] == doctest::Approx(0.17691002786159515).epsilon(1e-5));
    CHECK(*e.norm("\xC3\xBC"
                  "ber") == doctest::Approx(1.199291467666626).epsilon(1e-5));
    // "</s>" has no n-grams: its own row only.
    CHECK(*e.norm("</s>") == doctest::Approx(1.4020724296569824).epsilon(1e-5));
    CHECK((*e.embedding("</s>"))[2] == doctest::Approx(-0.196777805685997).epsilon(1e-5));
    // Unknown word: the normalised sum of its n-gram bucket rows.
    auto unknown = *e.embedding("unknown");
    CHECK(unknown[0] == doctest::Approx(0.35848841071128845).epsilon(1e-5));
    CHECK(unknown[1] == doctest::Approx(-0.07142322510480881).epsilon(1e-5));
    CHECK(*e.norm("unknown") == doctest::Approx(30.805622100830078).epsilon(1e-5));
    // Metadata records the training arguments.
    REQUIRE(e.metadata());
    CHECK(e.metadata()->find("dims")->as_integer() == 50);
    CHECK(*e.metadata()->find("model")->as_string() == "SkipGram");
    CHECK(*e.metadata()->find("loss")->as_string() == "NegativeSampling");
    CHECK(e.metadata()->find("sampling_threshold")->as_number() == doctest::Approx(1e-4));
    // And the result survives a finalfusion round trip, subwords included.
    auto back = Embeddings::read(e.to_bytes());
    CHECK(*back.embedding("unknown") == unknown);
    CHECK(modelzip::testing::words_of(*back.similar("unknown", 3)) ==
          std::vector<std::string>{"einer", "und", "des"});
  }

  TEST_CASE("floret: lookups equal floret's own vectors, text round trip") {
    auto e = read_floret_text(Bytes::copy_of(std::string_view(kFloret)));
    CHECK(e.vocab().kind() == VocabKind::floret);
    CHECK(e.vocab().words_len() == 0);
    CHECK(e.rows() == 10);
    auto check = read_text_dims(Bytes::copy_of(std::string_view(kFloretCheck)), kRaw);
    for (std::size_t w = 0; w < check.vocab().words_len(); ++w) {
      const std::string& word = check.vocab().words()[w];
      CAPTURE(word);
      auto v = e.embedding(word);
      REQUIRE(v);
      for (std::size_t i = 0; i < 10; ++i)
        CHECK((*v)[i] == doctest::Approx(check.matrix()[w * 10 + i]).epsilon(2e-4));
    }
    std::ostringstream out;
    write_floret_text(out, e);
    CHECK(out.str() == kFloret);
    // As a finalfusion file (chunk 9) and back.
    auto back = Embeddings::read(e.to_bytes());
    CHECK(back.vocab() == e.vocab());
    CHECK(*back.embedding("der") == *e.embedding("der"));
    // Square brackets as word boundaries change the n-grams (the
    // finalfusion-rust test with "[ ]": first component of "," is 1.3844874).
    std::string square = kFloret;
    square.replace(square.find("< >"), 3, "[ ]");
    auto s = read_floret_text(Bytes::copy_of(square));
    CHECK((*s.embedding(","))[0] == doctest::Approx(1.3844874).epsilon(1e-5));
    CHECK((*s.embedding("der"))[1] == doctest::Approx(3.038363).epsilon(1e-5));
    CHECK_THROWS_AS(write_floret_text(out, check), Error);
  }

  TEST_CASE("load and store through format names") {
    CHECK(embedding_format_from_name("textdims") == EmbeddingFormat::text_dims);
    CHECK(embedding_format_from_name("word2vec") == EmbeddingFormat::word2vec_binary);
    CHECK_FALSE(embedding_format_from_name("pickle"));
    CHECK(embedding_format_name(EmbeddingFormat::fasttext) == "fasttext");
    modelzip::testing::TempDir dir;
    auto e = load(ff_data("similarity.txt"), EmbeddingFormat::text_dims);
    for (EmbeddingFormat f : {EmbeddingFormat::finalfusion, EmbeddingFormat::word2vec_binary,
                              EmbeddingFormat::text, EmbeddingFormat::text_dims}) {
      CAPTURE(embedding_format_name(f));
      const auto path = dir / ("out." + std::string(embedding_format_name(f)));
      store(path, e, f);
      auto back = load(path, f);
      CHECK(back.vocab() == e.vocab());
      CHECK(modelzip::testing::words_of(*back.similar("Berlin", 5)) ==
            modelzip::testing::words_of(*e.similar("Berlin", 5)));
    }
    CHECK_THROWS_AS(store(dir / "x.bin", e, EmbeddingFormat::fasttext), Error);
    try {
      load(dir / "missing.txt", EmbeddingFormat::text);
      FAIL("missing file loaded");
    } catch (const Error& err) {
      CHECK(err.code() == ErrorCode::io);
    }
  }

  TEST_CASE("Readers given a source name it in their errors; without one they name no file") {
    const Bytes bad = Bytes::copy_of(std::string_view("2 3\nword 1 2\n"));  // short rows
    const std::vector<std::pair<std::string, SourceReader>> readers = {
        {"word2vec binary",
         [&](std::string_view source) {
           source.empty() ? (void)read_word2vec_binary(bad)
                          : (void)read_word2vec_binary(bad, {}, source);
         }},
        {"text",
         [&](std::string_view source) {
           source.empty() ? (void)read_text(bad) : (void)read_text(bad, {}, source);
         }},
        {"text with dims",
         [&](std::string_view source) {
           source.empty() ? (void)read_text_dims(bad) : (void)read_text_dims(bad, {}, source);
         }},
        {"fastText",
         [&](std::string_view source) {
           source.empty() ? (void)read_fasttext(bad) : (void)read_fasttext(bad, {}, source);
         }},
        {"floret text", [&](std::string_view source) {
           source.empty() ? (void)read_floret_text(bad) : (void)read_floret_text(bad, source);
         }}};
    check_errors_name_source(readers, "https://example.org/vectors");
  }
}
