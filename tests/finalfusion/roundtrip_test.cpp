// Write-then-read round trips of every chunk type: all five vocabularies,
// dense and quantized storage (with and without projection and norms),
// metadata and norms; and the exact bytes of small hand-checked files.
#include <doctest/doctest.h>

#include <cstring>
#include <random>

#include "../zip/expect_error.hpp"
#include "ff_test_support.hpp"
#include "io/syscalls.hpp"
#include "modelzip/finalfusion/convert.hpp"

using namespace modelzip;
using namespace modelzip::finalfusion;

namespace {

std::vector<float> random_matrix(std::size_t rows, std::size_t dims, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> m(rows * dims);
  for (auto& v : m) v = static_cast<float>(static_cast<double>(rng() % 2000) / 1000.0 - 1.0);
  return m;
}

void check_same(const Embeddings& a, const Embeddings& b) {
  CHECK(a.vocab() == b.vocab());
  CHECK(a.rows() == b.rows());
  CHECK(a.dims() == b.dims());
  CHECK(a.quantized() == b.quantized());
  CHECK(a.has_norms() == b.has_norms());
  CHECK(std::equal(a.norms().begin(), a.norms().end(), b.norms().begin(), b.norms().end()));
  CHECK(a.metadata().has_value() == b.metadata().has_value());
  if (a.metadata() && b.metadata()) {
    CHECK(*a.metadata() == *b.metadata());
    CHECK(a.metadata()->toml() == b.metadata()->toml());
  }
  std::vector<float> ra(a.dims()), rb(b.dims());
  for (std::size_t r = 0; r < a.rows(); ++r) {
    a.row(r, ra);
    b.row(r, rb);
    REQUIRE(ra == rb);
  }
}

Embeddings round_trip(const Embeddings& e) {
  const Bytes bytes = e.to_bytes();
  auto back = Embeddings::read(bytes);
  check_same(e, back);
  // Writing again gives the same bytes.
  const Bytes again = back.to_bytes();
  REQUIRE(again.size() == bytes.size());
  CHECK(std::memcmp(again.data(), bytes.data(), bytes.size()) == 0);
  return back;
}

}  // namespace

TEST_SUITE("finalfusion") {
  TEST_CASE("every vocabulary kind round-trips with dense storage, metadata and norms") {
    EmbeddingsMetadata meta = EmbeddingsMetadata::parse(
        "name = \"test\"\nversion = 3\nratio = 0.25\nok = true\nwhen = 1979-05-27T07:32:00Z\n"
        "list = [1, 2, 3]\n[section]\nkey = \"value\"\n");
    const std::vector<std::string> words = {"Berlin", "M\xC3\xBCnchen", "K\xC3\xB6ln", "</s>"};
    std::vector<Vocab> vocabs = {
        Vocab::simple(words),
        Vocab::bucket_subwords(words, 3, 6, 4),
        Vocab::fasttext_subwords(words, 2, 5, 7),
        Vocab::explicit_ngrams(words, 3, 4,
                               {{"<Be", 10}, {"Ber", 11}, {"erl", 10}, {"\xC3\xBCn", 3}}),
        Vocab::floret(3, 5, 9, 3, 1234, "[", "]"),
    };
    for (const auto& vocab : vocabs) {
      CAPTURE(vocab_kind_name(vocab.kind()));
      const std::size_t rows = vocab.rows(), dims = 6;
      auto matrix = random_matrix(rows, dims, rows);
      std::vector<float> norms(vocab.words_len(), 2.5f);
      auto e = Embeddings::from_matrix(
          vocab, matrix, dims, vocab.words_len() ? std::optional(norms) : std::nullopt, meta);
      auto back = round_trip(e);
      CHECK(back.vocab().kind() == vocab.kind());
      // Unknown-word lookups agree after the round trip.
      if (vocab.has_subwords()) CHECK(*back.embedding("Bern") == *e.embedding("Bern"));
      // Without metadata and norms.
      round_trip(Embeddings::from_matrix(vocab, matrix, dims));
    }
  }

  TEST_CASE("quantized storage round-trips with and without projection and norms") {
    auto vocab = Vocab::bucket_subwords({"a", "b", "c", "d", "e"}, 3, 6, 3);
    auto e = Embeddings::from_matrix(vocab, random_matrix(vocab.rows(), 8, 7), 8);
    for (bool normalize : {false, true})
      for (bool rotation : {false, true}) {
        CAPTURE(normalize);
        CAPTURE(rotation);
        PqOptions options;
        options.n_subquantizers = 4;
        options.n_centroids = 5;
        options.normalize = normalize;
        options.random_rotation = rotation;
        auto q = e.quantize(options).embeddings;
        REQUIRE(q.quantized());
        CHECK(q.quantizer()->has_projection == rotation);
        CHECK(q.quantizer()->has_norms == normalize);
        auto back = round_trip(q);
        CHECK(*back.embedding("abc") == *q.embedding("abc"));
      }
  }

  TEST_CASE("a small file has exactly the bytes worked out by hand") {
    // Header: "FiFu", version 0, 3 chunks (1, 2, 6).
    // SimpleVocab at 24: id 1, length 8 + 5 + 6 = 19, count 2, "a", "bc".
    // NdArray at 55: id 2, length 8+4+4+pad+16, rows 2, cols 2, type 10;
    //   data would start at 55 + 12 + 16 = 83, 83 % 4 = 3 -> 1 byte of padding.
    // NdNorms at 104: id 6, length 8+4+pad+8; data at 104 + 24 = 128 ->
    //   128 % 4 = 0 -> 4 bytes of padding (never 0).
    auto e = Embeddings::from_matrix(Vocab::simple({"a", "bc"}), {1, 2, 3, 4}, 2,
                                     std::vector<float>{5, 6});
    const Bytes b = e.to_bytes();
    std::vector<unsigned char> expected = {'F', 'i', 'F', 'u', 0, 0, 0, 0, 3, 0, 0, 0,
                                           1,   0,   0,   0,   2, 0, 0, 0, 6, 0, 0, 0};
    auto u32 = [&](std::uint32_t v) {
      for (int i = 0; i < 4; ++i) expected.push_back(static_cast<unsigned char>(v >> (8 * i)));
    };
    auto u64 = [&](std::uint64_t v) {
      for (int i = 0; i < 8; ++i) expected.push_back(static_cast<unsigned char>(v >> (8 * i)));
    };
    auto f32 = [&](float f) {
      std::uint32_t v;
      std::memcpy(&v, &f, 4);
      u32(v);
    };
    u32(1), u64(19), u64(2), u32(1), expected.push_back('a'), u32(2), expected.push_back('b'),
        expected.push_back('c');
    u32(2), u64(8 + 4 + 4 + 1 + 16), u64(2), u32(2), u32(10), expected.push_back(0);
    f32(1), f32(2), f32(3), f32(4);
    u32(6), u64(8 + 4 + 4 + 8), u64(2), u32(10), u32(0), f32(5), f32(6);
    REQUIRE(b.size() == expected.size());
    CHECK(std::memcmp(b.data(), expected.data(), expected.size()) == 0);
  }

  TEST_CASE("metadata: parsed values, TOML from a tree, errors with the line") {
    auto m = EmbeddingsMetadata::parse("a = 1\n[b]\nc = \"x\"\nd = [true, 2.5]\n");
    CHECK(m.find("a")->as_integer() == 1);
    CHECK(*m.find("b.c")->as_string() == "x");
    CHECK(m.find("b.d")->items().size() == 2);
    CHECK(m.find("b.d")->items()[0].as_boolean() == true);
    CHECK(m.find("b.d")->items()[1].as_number() == 2.5);
    CHECK(m.find("b.c.e") == nullptr);
    MetadataValue root;
    root.set("language", MetadataValue::string("de"));
    root.set("dims", MetadataValue::integer(300));
    MetadataValue inner;
    inner.set("when", MetadataValue::datetime("2021-01-02"));
    root.set("training", inner);
    auto built = EmbeddingsMetadata::from_table(root);
    CHECK(built.root() == root);
    CHECK(EmbeddingsMetadata::parse(built.toml()) == built);
    try {
      EmbeddingsMetadata::parse("a = 1\nb = = 2\n");
      FAIL("invalid TOML accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::corrupt);
      CHECK(e.context().line == 2u);
    }
    CHECK_THROWS_AS(EmbeddingsMetadata::parse("a = \"\xC3\"\n"), Error);
    CHECK_THROWS_AS(EmbeddingsMetadata::from_table(MetadataValue::integer(1)), Error);
  }

  TEST_CASE("with_metadata / with_norms / store") {
    modelzip::testing::TempDir dir;
    auto e = Embeddings::open(modelzip::testing::ff_data("embeddings.fifu"));
    auto m = e.with_metadata(EmbeddingsMetadata::parse("x = 1\n")).with_norms(std::nullopt);
    store(dir / "out.fifu", m, EmbeddingFormat::finalfusion);
    auto back = Embeddings::open(dir / "out.fifu");
    CHECK(back.metadata()->find("x")->as_integer() == 1);
    CHECK_FALSE(back.has_norms());
    CHECK_THROWS_AS(e.with_norms(std::vector<float>{1, 2}), Error);
  }

  TEST_CASE("store: a failed close of the new file leaves the old one; the error names the file") {
    modelzip::testing::TempDir dir;
    auto e = Embeddings::open(modelzip::testing::ff_data("embeddings.fifu"));
    store(dir / "out.fifu", e, EmbeddingFormat::finalfusion, {.durable = false});
    const std::string before = modelzip::testing::io_bytes(dir / "out.fifu");
    auto m = e.with_metadata(EmbeddingsMetadata::parse("x = 1\n"));
    io::FaultInjector injector(
        {.action = io::FaultInjector::Action::fail, .kind = io::SysOp::close, .nth = 1});
    injector.install();
    auto err = modelzip::testing::caught(
        [&] { store(dir / "out.fifu", m, EmbeddingFormat::finalfusion); });
    injector.uninstall();
    REQUIRE(err.has_value());
    CHECK(err->code() == ErrorCode::io);
    CHECK(err->context().archive == (dir / "out.fifu").string());
    CHECK(std::string(err->what()).find(".mztmp") == std::string::npos);
    CHECK(modelzip::testing::io_bytes(dir / "out.fifu") == before);
    CHECK(std::distance(std::filesystem::directory_iterator(dir.path()),
                        std::filesystem::directory_iterator()) == 1);
  }
}

TEST_CASE("Embeddings and Vocab moved from stay usable: moving copies the shared state") {
  Vocab vocab = Vocab::simple({"a", "b"});
  Vocab moved_vocab = std::move(vocab);
  CHECK(vocab.rows() == 2);  // NOLINT(bugprone-use-after-move)
  auto e = Embeddings::from_matrix(moved_vocab, {1, 0, 0, 1}, 2);
  Embeddings moved = std::move(e);
  CHECK(e.rows() == 2);  // NOLINT(bugprone-use-after-move)
  CHECK(e.dims() == 2);
  CHECK(e.vocab().words()[1] == "b");
  CHECK(e.embedding("a").has_value());
  Embeddings other = Embeddings::from_matrix(Vocab::simple({"c"}), {3, 4}, 2);
  other = std::move(moved);
  CHECK(moved.rows() == 2);  // NOLINT(bugprone-use-after-move)
  CHECK(other.rows() == 2);
}

// Accessors that return a reference into shared state return a copy when
// called on a temporary: the state may die with it before the copy is used.
TEST_CASE(
    "Accessors of temporary Embeddings, Vocab and EmbeddingsMetadata return copies that outlive "
    "them") {
  auto make = [] {
    return Embeddings::from_matrix(Vocab::simple({"a", "b"}), {1, 0, 0, 1}, 2, std::nullopt,
                                   EmbeddingsMetadata::parse("kind = \"test\"\n"));
  };
  auto bytes = make().to_bytes();
  std::string name;
  for (char c : Embeddings::read(bytes, "model.fifu").name()) name += c;
  CHECK(name == "model.fifu");
  const Vocab& vocab = make().vocab();
  const auto& metadata = make().metadata();
  const std::string& bow = Vocab::floret(3, 6, 1000, 2, 7).bow();
  const std::string& eow = Vocab::floret(3, 6, 1000, 2, 7, "[", "]").eow();
  CHECK(vocab.rows() == 2);
  REQUIRE(metadata.has_value());
  CHECK(metadata->find("kind") != nullptr);
  CHECK(bow == "<");
  CHECK(eow == "]");
  std::string toml;
  for (char c : EmbeddingsMetadata::parse("kind = \"test\"\n").toml()) toml += c;
  CHECK(toml == "kind = \"test\"\n");
  const MetadataValue& root = EmbeddingsMetadata::parse("kind = \"test\"\n").root();
  CHECK(root.get("kind") != nullptr);
}

// The spans of temporary Embeddings or Vocab keep the shared state alive:
// `for (auto& w : Embeddings::open(p).vocab().words())` iterated the words of
// a Vocab copy destroyed, with the Embeddings, before the loop body ran
// (AddressSanitizer and valgrind report the reads). MetadataValue holds no
// shared state: its items() and keys() on a temporary are copies.
TEST_CASE("Spans of temporary Embeddings and Vocab keep the state alive; MetadataValue copies") {
  const std::vector<std::string> words{"a word long enough to live on the heap", "b"};
  auto make = [&] {
    return Embeddings::from_matrix(Vocab::simple(words), {3, 4, 0, 1}, 2, std::vector<float>{5, 1});
  };
  std::vector<std::string> seen;
  for (const std::string& w : make().vocab().words()) seen.push_back(w);
  CHECK(seen == words);
  seen.clear();
  const Bytes file = make().to_bytes();
  for (const std::string& w : Embeddings::read(file).vocab().words()) seen.push_back(w);
  CHECK(seen == words);
  std::vector<float> matrix, norms;
  for (float x : make().matrix()) matrix.push_back(x);
  for (float x : make().norms()) norms.push_back(x);
  CHECK(matrix == std::vector<float>{3, 4, 0, 1});
  CHECK(norms == std::vector<float>{5, 1});

  auto explicit_vocab = [] {
    return Vocab::explicit_ngrams(
        {"word"}, 3, 3, {{"<wo", 7}, {"wor", 9}, {"an n-gram long enough for the heap", 7}});
  };
  std::vector<std::string> ngrams;
  std::vector<std::uint64_t> indices;
  for (const std::string& g : explicit_vocab().ngrams()) ngrams.push_back(g);
  for (std::uint64_t i : explicit_vocab().ngram_indices()) indices.push_back(i);
  CHECK(ngrams == std::vector<std::string>{"<wo", "wor", "an n-gram long enough for the heap"});
  CHECK(indices == std::vector<std::uint64_t>{0, 1, 0});

  const std::string toml = "first = 1\nsecond = \"a string long enough for the heap\"\n";
  std::vector<std::string> keys;
  std::vector<MetadataValue::Kind> kinds;
  for (const std::string& k : EmbeddingsMetadata::parse(toml).root().keys()) keys.push_back(k);
  for (const MetadataValue& v : EmbeddingsMetadata::parse(toml).root().items())
    kinds.push_back(v.kind());
  CHECK(keys == std::vector<std::string>{"first", "second"});
  CHECK(kinds == std::vector{MetadataValue::Kind::integer, MetadataValue::Kind::string});
}

// The accessors of metadata that return a pointer into the value (get, find,
// as_string) pointed into a temporary that died at the end of the statement:
// `auto v = EmbeddingsMetadata::parse(text).find("model.name"); v->kind()` read freed
// memory (AddressSanitizer: heap-use-after-free). On an rvalue they return a
// copy (or nullopt) now.
TEST_CASE("Pointer accessors of temporary metadata return copies that outlive it") {
  const std::string toml = "[model]\nname = \"a name long enough for the heap\"\nlayers = 4\n";
  auto parsed = [&] { return EmbeddingsMetadata::parse(toml); };
  auto found = parsed().find("model.name");
  REQUIRE(found);
  CHECK(found->kind() == MetadataValue::Kind::string);
  CHECK(*found->as_string() == "a name long enough for the heap");
  auto member = parsed().root().get("model");
  REQUIRE(member);
  CHECK(member->keys().size() == 2);
  auto deep = parsed().root().find("model.layers");
  REQUIRE(deep);
  CHECK(deep->as_integer() == 4);
  auto text = MetadataValue::string("a string long enough for the heap").as_string();
  REQUIRE(text);
  CHECK(*text == "a string long enough for the heap");
  CHECK_FALSE(parsed().find("model.missing"));
  CHECK_FALSE(parsed().root().get("missing"));
  CHECK_FALSE(MetadataValue::integer(1).as_string());
  // On values that live, pointers as before.
  const EmbeddingsMetadata m = parsed();
  static_assert(std::is_same_v<decltype(m.find("model")), const MetadataValue*>);
  static_assert(std::is_same_v<decltype(m.root().get("model")), const MetadataValue*>);
  static_assert(std::is_same_v<decltype(m.root().find("model")), const MetadataValue*>);
  static_assert(std::is_same_v<decltype(m.find("model")->as_string()), const std::string*>);
  static_assert(std::is_same_v<decltype(parsed().find("model")), std::optional<MetadataValue>>);
  CHECK(m.find("model.name") == m.root().get("model")->get("name"));
}
