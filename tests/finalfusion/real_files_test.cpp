// The real finalfusion files in the shared test data: structure, values
// decoded independently (numpy over the raw bytes, see the comments),
// zero-copy views, files written back as read, and byte-identical encoding.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "ff_test_support.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/finalfusion/convert.hpp"
#include "modelzip/writer.hpp"

using namespace modelzip;
using namespace modelzip::finalfusion;
using modelzip::testing::ff_bytes;
using modelzip::testing::ff_data;

TEST_SUITE("finalfusion") {
  TEST_CASE("embeddings.fifu: simple vocab, normalised rows, unlisted norms chunk") {
    auto e = Embeddings::open(ff_data("embeddings.fifu"));
    CHECK(e.vocab().kind() == VocabKind::simple);
    const std::vector<std::string> words = {"one", "two", "three", "four", "five", "six", "seven"};
    CHECK(std::vector<std::string>(e.vocab().words().begin(), e.vocab().words().end()) == words);
    CHECK(e.dims() == 10);
    CHECK(e.rows() == 7);
    CHECK_FALSE(e.quantized());
    CHECK_FALSE(e.metadata());
    CHECK(e.storage_is_view());
    // numpy: np.frombuffer(d, '<f4', 70, 124).reshape(7, 10)[0]
    const float one[10] = {0.45749571919441223f,
                           0.15249857306480408f,
                           0,
                           0,
                           0,
                           0,
                           0.30499714612960815f,
                           0.30499714612960815f,
                           0.6099942922592163f,
                           0.45749571919441223f};
    auto v = e.embedding("one");
    REQUIRE(v);
    for (int i = 0; i < 10; ++i) CHECK((*v)[i] == one[i]);
    // Norms as finalfusion-python's tests list them (TEST_NORMS).
    const double norms[7] = {6.557438373565674, 8.83176040649414,   6.164413928985596,
                             9.165151596069336, 7.4833149909973145, 7.211102485656738,
                             7.4833149909973145};
    REQUIRE(e.has_norms());
    REQUIRE(e.norms().size() == 7);
    for (int i = 0; i < 7; ++i) CHECK(e.norms()[i] == static_cast<float>(norms[i]));
    CHECK(e.norm("four") == static_cast<float>(norms[3]));
    CHECK_FALSE(e.embedding("eight"));  // simple vocab: no subwords
    CHECK_FALSE(e.norm("eight"));
  }

  TEST_CASE("ff_buckets.fifu: metadata, bucket vocab, unknown words from n-grams") {
    auto e = Embeddings::read(ff_bytes("ff_buckets.fifu"), "ff_buckets.fifu");
    CHECK(e.vocab().kind() == VocabKind::bucket_subwords);
    CHECK(e.vocab().words_len() == 2);
    CHECK(e.vocab().words()[1] == "</s>");
    CHECK(e.vocab().min_n() == 3);
    CHECK(e.vocab().max_n() == 6);
    CHECK(e.vocab().bucket_exponent() == 10);
    CHECK(e.rows() == 1026);
    CHECK(e.dims() == 5);
    REQUIRE(e.metadata());
    const auto& m = *e.metadata();
    CHECK(m.find("common_config.dims")->as_integer() == 5);
    CHECK(*m.find("common_config.loss")->as_string() == "LogisticNegativeSampling");
    CHECK(*m.find("vocab_config.type")->as_string() == "SubwordVocab");
    CHECK(m.find("vocab_config.buckets_exp")->as_integer() == 10);
    CHECK(m.find("common_config.lr")->as_number() == doctest::Approx(0.05));
    CHECK(m.find("model_config.nope") == nullptr);
    // numpy over the raw rows (expect2.py): the n-grams of "<zwei>" hashed
    // with Python FNV-1a 64 & 1023, rows 2 + bucket summed and normalised.
    auto zwei = e.embedding("zwei");
    REQUIRE(zwei);
    // (The matrix starts at byte 468: 4 bytes of padding after position 464.)
    const float expected[5] = {0.15992380678653717f, -0.3311893939971924f, -0.11164036393165588f,
                               0.11833247542381287f, 0.9155718684196472f};
    for (int i = 0; i < 5; ++i) CHECK((*zwei)[i] == doctest::Approx(expected[i]).epsilon(1e-5));
    CHECK(*e.norm("zwei") == doctest::Approx(0.5167872309684753).epsilon(1e-5));
    auto daniel = e.embedding("Dani\xC3\xABl");
    REQUIRE(daniel);
    CHECK((*daniel)[0] == doctest::Approx(0.45563969016075134).epsilon(1e-5));
    CHECK((*daniel)[1] == doctest::Approx(-0.8627741932868958).epsilon(1e-5));
    CHECK(*e.norm("Dani\xC3\xABl") == doctest::Approx(1.4861031770706177).epsilon(1e-5));
    // Known word: its stored row and norm.
    auto one = e.embedding("one");
    REQUIRE(one);
    CHECK((*one)[0] == 0.24349285662174225f);
    CHECK((*one)[3] == -0.7992397546768188f);
    CHECK(*e.norm("one") == 0.11185680329799652f);
    CHECK(e.vocab().subword_rows("").size() == 0);  // "<>" has no 3-grams
    CHECK_FALSE(e.embedding(""));
  }

  TEST_CASE("pq.fifu and quantized.fifu: product-quantized storage") {
    for (const char* name : {"pq.fifu", "quantized.fifu"}) {
      CAPTURE(name);
      auto e = Embeddings::open(ff_data(name));
      REQUIRE(e.quantized());
      auto q = *e.quantizer();
      CHECK(q.n_subquantizers == 50);
      CHECK(q.n_centroids == 32);
      CHECK(q.dims == 100);
      CHECK_FALSE(q.has_projection);
      CHECK(q.has_norms);
      CHECK(e.rows() == 41);
      CHECK(e.matrix().empty());
      CHECK(e.storage_is_view());
    }
    // numpy (expect2.py): concatenated centroids of row 0 times its norm.
    auto e = Embeddings::open(ff_data("pq.fifu"));
    auto berlin = e.embedding("Berlin");
    REQUIRE(berlin);
    CHECK((*berlin)[0] == doctest::Approx(0.10129453986883163).epsilon(1e-6));
    CHECK((*berlin)[1] == doctest::Approx(-0.17369180917739868).epsilon(1e-6));
    CHECK((*berlin)[3] == doctest::Approx(0.1853678822517395).epsilon(1e-6));
    CHECK(modelzip::testing::l2(*berlin) == doctest::Approx(1.0003246068954468).epsilon(1e-6));
    std::vector<float> last(100);
    e.row(40, last);
    CHECK(last[97] == doctest::Approx(0.041057802736759186).epsilon(1e-6));
    CHECK(last[99] == doctest::Approx(-0.11790430545806885).epsilon(1e-6));
    // Cosine neighbours of the reconstructed rows (numpy).
    auto similar = e.similar("Berlin", 5);
    REQUIRE(similar);
    CHECK(modelzip::testing::words_of(*similar) ==
          std::vector<std::string>{"Potsdam", "Hamburg", "Leipzig", "Dresden", "M\xC3\xBCnchen"});
    CHECK((*similar)[0].similarity == doctest::Approx(0.881797).epsilon(1e-5));
    CHECK((*similar)[1].similarity == doctest::Approx(0.869249).epsilon(1e-5));
  }

  TEST_CASE("similarity.fifu, similarity-normalized.fifu, simple_vocab.fifu") {
    auto e = Embeddings::open(ff_data("similarity.fifu"));
    CHECK(e.vocab().words_len() == 41);
    CHECK(e.dims() == 100);
    CHECK_FALSE(e.has_norms());
    // numpy: np.frombuffer(d, '<f4', 4100, 576)[:4] (2 bytes of padding at 574).
    CHECK(e.matrix()[0] == 1.4724286794662476f);
    CHECK(e.matrix()[1] == -3.066047191619873f);
    CHECK(e.matrix()[3] == 3.178567886352539f);
    CHECK(*e.norm("Berlin") == doctest::Approx(modelzip::testing::l2(*e.embedding("Berlin"))));
    auto n = Embeddings::open(ff_data("similarity-normalized.fifu"));
    CHECK(n.vocab() == e.vocab());
    auto s = Embeddings::open(ff_data("simple_vocab.fifu"));
    CHECK(s.vocab().words_len() == 43);
    CHECK(s.vocab().words()[0] == "Paris");
    CHECK(s.vocab().words()[1] == "Frankreich");
  }

  TEST_CASE(
      "embeddings read from a file write that file, byte for byte; changed ones are encoded") {
    for (const char* name : {"embeddings.fifu", "ff_buckets.fifu", "pq.fifu", "similarity.fifu"}) {
      CAPTURE(name);
      const Bytes original = ff_bytes(name);
      const Embeddings read = Embeddings::read(original);
      const Embeddings opened = Embeddings::open(ff_data(name));
      for (const Embeddings& e : {read, opened, Embeddings(opened)}) {
        CHECK(e.to_bytes().as_string_view() == original.as_string_view());
        std::ostringstream stream;
        e.write(stream);
        CHECK(stream.str() == std::string(original.as_string_view()));
      }
      CHECK(read.to_bytes().data() == original.data());  // the same bytes, not a copy
    }
    // A change is encoded: the new metadata is written, the norms dropped.
    const Embeddings buckets = Embeddings::read(ff_bytes("ff_buckets.fifu"));
    const Embeddings changed =
        buckets.with_metadata(EmbeddingsMetadata::parse("changed = true\n")).with_norms({});
    const Embeddings again = Embeddings::read(changed.to_bytes());
    REQUIRE(again.metadata());
    CHECK(again.metadata()->toml() == "changed = true\n");
    CHECK_FALSE(again.has_norms());
    CHECK(again.vocab() == buckets.vocab());
  }

  // The encoding of `file`'s embeddings (with_metadata gives a state of its
  // own, which write encodes).
  Bytes encoded(const Bytes& file) {
    const Embeddings e = Embeddings::read(file);
    return e.with_metadata(e.metadata()).to_bytes();
  }

  TEST_CASE("encoding reproduces the reference writer's bytes") {
    for (const char* name : {"pq.fifu", "quantized.fifu", "similarity.fifu",
                             "similarity-normalized.fifu", "simple_vocab.fifu"}) {
      CAPTURE(name);
      const Bytes original = ff_bytes(name);
      const Bytes rewritten = encoded(original);
      REQUIRE(rewritten.size() == original.size());
      CHECK(std::memcmp(rewritten.data(), original.data(), original.size()) == 0);
      std::ostringstream stream;
      const Embeddings e = Embeddings::read(original);
      e.with_metadata(e.metadata()).write(stream);
      CHECK(stream.str() == std::string(original.as_string_view()));
    }
    // Files whose norms chunk the header did not list: the rewrite lists it
    // and is otherwise identical.
    for (const char* name : {"embeddings.fifu", "ff_buckets.fifu"}) {
      CAPTURE(name);
      const Bytes original = ff_bytes(name);
      const Bytes rewritten = encoded(original);
      REQUIRE(rewritten.size() == original.size() + 4);
      std::uint32_t count_original, count_rewritten;
      std::memcpy(&count_original, original.data() + 8, 4);
      std::memcpy(&count_rewritten, rewritten.data() + 8, 4);
      CHECK(count_rewritten == count_original + 1);
      std::uint32_t last_id;
      std::memcpy(&last_id, rewritten.data() + 12 + 4 * count_original, 4);
      CHECK(last_id == 6);
      const std::size_t header = 12 + 4 * count_original;
      CHECK(std::memcmp(rewritten.data() + header + 4, original.data() + header,
                        original.size() - header) == 0);
    }
  }

  TEST_CASE("storage is a zero-copy view when aligned, an owned copy when not") {
    const Bytes original = ff_bytes("similarity.fifu");
    auto mapped = Embeddings::open(ff_data("similarity.fifu"));
    CHECK(mapped.storage_is_view());
    // An archive hands out slices at 64-byte aligned addresses: still a view.
    std::vector<std::byte> buffer(original.size() + 64);
    auto* aligned =
        buffer.data() + (64 - reinterpret_cast<std::uintptr_t>(buffer.data()) % 64) % 64;
    std::memcpy(aligned, original.data(), original.size());
    auto at_aligned = Embeddings::read(
        Bytes::borrow(std::span<const std::byte>(aligned, original.size()), nullptr));
    CHECK(at_aligned.storage_is_view());
    CHECK(reinterpret_cast<const std::byte*>(at_aligned.matrix().data()) == aligned + 576);
    // One byte off: the floats are misaligned and get copied.
    std::memmove(aligned + 1, aligned, original.size());
    auto misaligned = Embeddings::read(
        Bytes::borrow(std::span<const std::byte>(aligned + 1, original.size()), nullptr));
    CHECK_FALSE(misaligned.storage_is_view());
    CHECK(std::equal(misaligned.matrix().begin(), misaligned.matrix().end(),
                     mapped.matrix().begin(), mapped.matrix().end()));
    // Quantized codes are bytes: always a view.
    auto pq = Embeddings::read(ff_bytes("pq.fifu"));
    CHECK(pq.storage_is_view());
    // Read without mmap: owned memory, still viewed without a second copy.
    auto read = Embeddings::open(ff_data("similarity.fifu"), {.mmap = false});
    CHECK(read.storage_is_view());
  }

  TEST_CASE("inside an archive: the entry is the file, 64-byte aligned, the matrix a view of it") {
    modelzip::testing::TempDir dir;
    const auto path = dir.path() / "e.zip";
    const Bytes original = ff_bytes("similarity.fifu");
    {
      Writer writer = Writer::open(path);
      NewTag tag;
      tag.add_embedding("words", original);
      writer.add_tag("v1", std::move(tag));
      writer.commit();
    }
    Archive archive = Archive::open(path);
    const Bytes entry = archive.embedding_file("words");
    REQUIRE(entry.size() == original.size());
    CHECK(std::memcmp(entry.data(), original.data(), original.size()) == 0);
    // FORMAT.md section 1: stored entry data starts at a multiple of 64 in
    // the file, and the archive mapping is page-aligned.
    CHECK(reinterpret_cast<std::uintptr_t>(entry.data()) % 64 == 0);
    auto e = Embeddings::read(entry, "words");
    CHECK(e.storage_is_view());
    // similarity.fifu's matrix starts at byte 576 (FINALFUSION.md: 12 + 4 * 2
    // header bytes, SimpleVocab 12 + 514, NdArray frame 12 + 16, 2 bytes of
    // padding).
    CHECK(reinterpret_cast<const std::byte*>(e.matrix().data()) == entry.data() + 576);
    auto standalone = Embeddings::open(ff_data("similarity.fifu"));
    CHECK(std::equal(e.matrix().begin(), e.matrix().end(), standalone.matrix().begin(),
                     standalone.matrix().end()));
    CHECK(*e.similar("Berlin", 5) == *standalone.similar("Berlin", 5));
  }

  TEST_CASE("a damaged embedding file is refused at commit, naming its parameter and tag") {
    modelzip::testing::TempDir dir;
    const auto path = dir.path() / "e.zip";
    Writer writer = Writer::open(path);
    NewTag tag;
    tag.add_embedding("words", ff_bytes("similarity.fifu"));
    tag.add_embedding("damaged", Bytes::copy_of(std::string_view("FiFx and more bytes")));
    writer.add_tag("v1", std::move(tag));
    try {
      writer.commit();
      FAIL("commit accepted a damaged embedding file");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::corrupt);
      CHECK(e.context().entry == "");  // the file has no entry yet
      CHECK(e.context().tag == "v1");
      CHECK(e.context().offset == 0u);
      CHECK(std::string(e.what()) == path.string() +
                                         ": tag 'v1': offset 0: embedding parameter 'damaged': "
                                         "not a finalfusion file (magic is not 'FiFu')");
    }
    CHECK_FALSE(std::filesystem::exists(path));
  }

  TEST_CASE("an embedding parameter's shape is its storage's rows and dims, as ls shows them") {
    modelzip::testing::TempDir dir;
    const auto path = dir.path() / "e.zip";
    // Every real file, as it is or converted to finalfusion: simple and
    // subword vocabularies, metadata before the vocabulary, unlisted norms,
    // quantized storage.
    const ConvertOptions lossy{Utf8Policy::lossy, true};
    const std::vector<std::pair<std::string, Bytes>> files = {
        {"embeddings.fifu", ff_bytes("embeddings.fifu")},
        {"ff_buckets.fifu", ff_bytes("ff_buckets.fifu")},
        {"pq.fifu", ff_bytes("pq.fifu")},
        {"quantized.fifu", ff_bytes("quantized.fifu")},
        {"similarity-normalized.fifu", ff_bytes("similarity-normalized.fifu")},
        {"similarity.fifu", ff_bytes("similarity.fifu")},
        {"simple_vocab.fifu", ff_bytes("simple_vocab.fifu")},
        {"similarity.bin", read_word2vec_binary(ff_bytes("similarity.bin")).to_bytes()},
        {"analogy.bin", read_word2vec_binary(ff_bytes("analogy.bin")).to_bytes()},
        {"utf8-incomplete.bin",
         read_word2vec_binary(ff_bytes("utf8-incomplete.bin"), lossy).to_bytes()},
        {"fasttext.bin", read_fasttext(ff_bytes("fasttext.bin")).to_bytes()},
        {"similarity.txt", read_text_dims(ff_bytes("similarity.txt")).to_bytes()},
        {"utf8-incomplete.dims",
         read_text_dims(ff_bytes("utf8-incomplete.dims"), lossy).to_bytes()},
        {"similarity.nodims", read_text(ff_bytes("similarity.nodims")).to_bytes()},
        {"utf8-incomplete.txt", read_text(ff_bytes("utf8-incomplete.txt"), lossy).to_bytes()},
    };
    {
      Writer writer = Writer::open(path);
      NewTag tag;
      for (const auto& [name, bytes] : files) tag.add_embedding(name, bytes);
      writer.add_tag("v1", std::move(tag));
      writer.commit();
    }
    const Archive archive = Archive::open(path);
    const std::vector<ParamInfo> params = archive.params();
    REQUIRE(params.size() == files.size());
    for (std::size_t i = 0; i < files.size(); ++i) {
      INFO(files[i].first);
      const Embeddings e = Embeddings::read(files[i].second, files[i].first);
      const Shape expected = {static_cast<std::int64_t>(e.rows()),
                              static_cast<std::int64_t>(e.dims())};
      CHECK(archive.param(files[i].first).shape == expected);
      CHECK(params[i].name == files[i].first);
      CHECK(params[i].shape == expected);
    }
  }

  TEST_CASE("a damaged embedding parameter is listed by name, without a shape") {
    modelzip::testing::TempDir dir;
    const auto path = dir.path() / "e.zip";
    {
      Writer writer = Writer::open(path);
      NewTag tag;
      tag.add_embedding("words", ff_bytes("similarity.fifu"));
      tag.add_embedding("buckets", ff_bytes("ff_buckets.fifu"));
      writer.add_tag("v1", std::move(tag));
      writer.commit();
    }
    {  // the magic of the first .fifu entry (similarity.fifu's) overwritten
      std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(file)), {});
      const std::size_t at = bytes.find("FiFu");
      REQUIRE(at != std::string::npos);
      file.seekp(static_cast<std::streamoff>(at));
      file.write("FiFo", 4);
    }
    const Archive archive = Archive::open(path);
    const std::vector<ParamInfo> params = archive.params();
    REQUIRE(params.size() == 2);
    CHECK(params[0].name == "words");
    CHECK(params[0].kind == BlobKind::embedding);
    CHECK(params[0].shape.empty());
    CHECK(archive.param("words").shape.empty());
    CHECK(params[1].shape == Shape{1026, 5});  // the other one is intact
    // Reading it says what is wrong.
    CHECK_THROWS_WITH_AS((void)Embeddings::read(archive.embedding_file("words"), "words"),
                         doctest::Contains("magic is not 'FiFu'"), Error);
  }
}
