#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "../zip/expect_error.hpp"
#include "model_builder.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/error.hpp"
#include "modelzip/writer.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

using Model = std::map<std::string, Tensor>;

Model random_model(std::mt19937_64& rng, int count) {
  Model m;
  for (int i = 0; i < count; ++i) {
    DType t = kAllDTypes[rng() % std::size(kAllDTypes)];
    m.emplace(odd_name(rng, i), random_tensor(rng, t));
  }
  return m;
}

void check_equal(const Model& expected, const NamedTensors& got) {
  REQUIRE(got.size() == expected.size());
  for (const auto& entry : expected) {
    const std::string& name = entry.first;
    const Tensor& t = entry.second;
    INFO("parameter " << name);
    REQUIRE(got.count(name));
    CHECK(got.at(name) == t);
  }
}

}  // namespace

TEST_CASE("Random models round-trip through many tags, zero-copy and copied") {
  TempDir dir;
  auto path = dir / "model.zip";
  std::mt19937_64 rng(1234);
  std::vector<std::pair<std::string, Model>> saved;
  for (int tag = 0; tag < 6; ++tag) {
    Model m = random_model(rng, 25);
    NewTag nt;
    for (const auto& [name, t] : m)
      nt.add(name, t, ParamOptions{rng() % 3 == 0 ? Compression::deflate : Compression::store});
    Writer w = Writer::open(path);
    std::string name = "step-" + std::to_string(tag * 100);
    w.add_tag(name, std::move(nt));
    w.commit();
    saved.emplace_back(name, std::move(m));
  }
  Archive a = Archive::open(path);
  REQUIRE(a.tags().size() == saved.size());
  CHECK(a.newest_tag() == "step-500");
  for (const auto& [tag, model] : saved) {
    check_equal(model, a.load(tag));
    check_equal(model, a.load(tag, {.mode = ReadMode::copy}));
  }
  // The newest tag is the default.
  check_equal(saved.back().second, a.load());
  CHECK(a.verify().empty());
}

TEST_CASE(
    "load gives the tensors in params.txt order, or in the order of names, as Python's load") {
  TempDir dir;
  auto path = dir / "order.zip";
  const std::vector<std::string> order = {"zeta", "alpha", "mid.weight", "Beta", "a"};
  NewTag nt;
  for (std::size_t i = 0; i < order.size(); ++i)
    nt.add(order[i], Tensor::dense(DType::int32, {1}, Bytes::copy_of(std::string(4, char(i)))));
  Writer w = Writer::open(path);
  w.add_tag("t", std::move(nt));
  w.commit();
  Archive a = Archive::open(path);
  std::vector<std::string> stored;
  for (const ParamInfo& p : a.params("t")) stored.push_back(p.name);
  REQUIRE(stored == order);  // params.txt keeps the order the tag was built in
  for (ReadMode mode : {ReadMode::zero_copy, ReadMode::copy, ReadMode::private_view}) {
    NamedTensors all = a.load("t", {.mode = mode});
    std::vector<std::string> names;
    for (const auto& [name, t] : all) names.push_back(name);
    CHECK(names == order);
    CHECK(all.at("mid.weight").values().data()[0] == std::byte{2});
    CHECK(all.find("missing") == all.end());
    try {  // as every error of the library: Error, naming what is missing and where
      (void)all.at("mid.weigth");
      FAIL("at() of a missing name did not throw");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::not_found);
      CHECK(e.message() ==
            "no tensor 'mid.weigth' (did you mean 'mid.weight'?) among 5: 'zeta', 'alpha', "
            "'mid.weight', 'Beta', 'a'");
      CHECK(e.context().archive == path.string());
      CHECK(e.context().tag == "t");
    }
  }
  const std::vector<std::string> some = {"a", "zeta", "Beta", "a"};
  for (ReadMode mode : {ReadMode::zero_copy, ReadMode::copy, ReadMode::private_view}) {
    std::vector<std::string> names;
    for (const auto& [name, t] : a.load("t", {.names = some, .mode = mode})) names.push_back(name);
    CHECK(names == std::vector<std::string>{"a", "zeta", "Beta"});  // "a" once, at its first place
  }
  CHECK(a.load("t", {.names = std::vector<std::string>{}}).empty());
}

TEST_CASE("NamedTensors::at throws Error(not_found) that lists the names held") {
  NamedTensors none;
  CHECK_THROWS_WITH_AS((void)none.at("w"), "no tensor 'w': there are no tensors", Error);
  NamedTensors many;
  for (int i = 0; i < 10; ++i) many.insert_or_assign("p" + std::to_string(i), Tensor());
  try {
    (void)std::move(many).at("q");
    FAIL("at() of a missing name did not throw");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::not_found);
    CHECK(e.message() ==
          "no tensor 'q' among 10: 'p0', 'p1', 'p2', 'p3', 'p4', 'p5', 'p6', 'p7' and 2 more");
    CHECK(e.context().archive.empty());  // built by hand: read from no archive
  }
}

TEST_CASE("Stored tensors are 64-byte aligned zero-copy views that outlive the Archive") {
  TempDir dir;
  auto path = dir / "m.zip";
  std::vector<float> v(1000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;
  NewTag nt;
  nt.add("w", Tensor::dense(DType::float32, {10, 100},
                            Bytes::borrow(std::as_bytes(std::span(v)), nullptr)));
  nt.add("odd-name-length-xyz",
         Tensor::dense(DType::float64, {3}, Bytes::copy_of(std::string(24, '\x01'))));
  Writer w = Writer::open(path);
  w.add_tag("v1", std::move(nt));
  w.commit();
  Tensor t;
  {
    Archive a = Archive::open(path);
    t = a.tensor("w");
    CHECK(a.tensor("odd-name-length-xyz").values().is_mapped());
    CHECK(reinterpret_cast<std::uintptr_t>(a.tensor("odd-name-length-xyz").values().data()) % 64 ==
          0);
  }
  CHECK(t.values().is_mapped());
  CHECK(reinterpret_cast<std::uintptr_t>(t.values().data()) % 64 == 0);
  auto f = t.as<float>();
  REQUIRE(f.size() == 1000);
  CHECK(f[999] == 499.5f);
  CHECK_FALSE(Archive::open(path).tensor("w", "", ReadMode::copy).values().is_mapped());
}

TEST_CASE("Sharing: explicit references and byte-equal dedup") {
  TempDir dir;
  auto path = dir / "m.zip";
  std::mt19937_64 rng(7);
  Tensor a = random_tensor(rng, DType::float32);
  Tensor big = Tensor::dense(DType::int32, {256, 256}, random_bytes(rng, 256 * 256 * 4));
  {
    Writer w = Writer::open(path);
    NewTag t1;
    t1.add("embed", big);
    t1.add("bias", a);
    w.add_tag("v1", std::move(t1));
    w.commit();
  }
  auto size_v1 = std::filesystem::file_size(path);
  {
    Writer w = Writer::open(path);
    NewTag t2;
    t2.share("embed", "V1", "embed");  // explicit, tag matched without regard to case
    t2.add("bias2", a);                // same bytes as v1's bias: dedup
    t2.add("copy", big.to_owned());    // same bytes again, found by content
    w.add_tag("v2", std::move(t2));
    w.commit();
    CHECK(w.last_stats().blobs_written == 0);
    CHECK(w.last_stats().blobs_deduplicated == 2);
  }
  // The second tag added only text entries, no tensor data.
  CHECK(std::filesystem::file_size(path) < size_v1 + 2048);
  Archive ar = Archive::open(path);
  auto params = ar.params("v2");
  REQUIRE(params.size() == 3);
  for (const auto& p : params) {
    CHECK(p.shared);
    CHECK(p.owner_tag == "v1");
  }
  CHECK(ar.tensor("copy", "v2") == big);
  CHECK(ar.tensor("bias2", "v2") == a);
  CHECK(ar.verify().empty());
}

TEST_CASE("Sharing many parameters and updater states from two tags, in one commit") {
  TempDir dir;
  auto path = dir / "m.zip";
  const int n = 3000;
  std::vector<float> value(2);
  auto tensor_of = [&](int i) {
    value = {static_cast<float>(i), -static_cast<float>(i)};
    return Tensor::dense(DType::float32, {2},
                         Bytes::copy_of(std::as_bytes(std::span(value.data(), 2))));
  };
  Writer w = Writer::open(path, WriterOptions{.dedup = false});
  for (const char* tag : {"a", "b"}) {
    NewTag t;
    for (int i = 0; i < n; ++i) t.add("p" + std::to_string(i), tensor_of(i));
    t.add_updater_state("p0", "M", tensor_of(-1));
    w.add_tag(tag, std::move(t));
  }
  NewTag c;  // half from a, half from b (staged in the same commit), in reverse order
  for (int i = n - 1; i >= 0; --i)
    c.share("p" + std::to_string(i), i % 2 ? "a" : "B", "p" + std::to_string(i));
  c.share_updater_state("p0", "M", "b");
  w.add_tag("c", std::move(c));
  w.commit();
  CHECK(w.last_stats().blobs_written == static_cast<std::uint64_t>(2 * (n + 1)));

  Archive ar = Archive::open(path);
  auto params = ar.params("c");
  REQUIRE(params.size() == static_cast<std::size_t>(n));
  for (const auto& p : params) {
    int i = std::stoi(p.name.substr(1));
    CHECK(p.shared);
    CHECK(p.owner_tag == (i % 2 ? "a" : "b"));
  }
  CHECK(ar.tensor("p1234", "c") == tensor_of(1234));
  CHECK(ar.updater_state("p0", "M", "c") == tensor_of(-1));

  Writer w2 = Writer::open(path);
  NewTag d;
  d.share("p1", "c", "p1");
  d.share("p9999", "c", "p9999");
  w2.add_tag("d", std::move(d));
  CHECK_THROWS_WITH_AS(w2.commit(), doctest::Contains("cannot share 'p9999'"), Error);

  Writer w3 = Writer::open(path);
  NewTag e;
  e.share_updater_state("p0", "V", "c");  // c has p0/M only
  w3.add_tag("e", std::move(e));
  CHECK_THROWS_WITH_AS(w3.commit(),
                       doctest::Contains("cannot share 'p0/V': tag 'c' has no such updater state"),
                       Error);
}

TEST_CASE("Dedup can be turned off") {
  TempDir dir;
  auto path = dir / "m.zip";
  Tensor t = Tensor::dense(DType::uint8, {4}, Bytes::copy_of(std::string("abcd")));
  Writer w = Writer::open(path, WriterOptions{.dedup = false});
  NewTag nt;
  nt.add("a", t);
  nt.add("b", t);
  w.add_tag("x", std::move(nt));
  w.commit();
  CHECK(w.last_stats().blobs_written == 2);
  auto params = Archive::open(path).params();
  CHECK(params[0].blob != params[1].blob);
}

TEST_CASE("Removing a tag keeps the blobs that other tags share") {
  TempDir dir;
  auto path = dir / "m.zip";
  std::mt19937_64 rng(99);
  Tensor w1 = Tensor::dense(DType::float32, {64}, random_bytes(rng, 256));
  Tensor w2 = Tensor::dense(DType::float32, {64}, random_bytes(rng, 256));
  Tensor w3 = Tensor::dense(DType::float32, {64}, random_bytes(rng, 256));
  {
    Writer w = Writer::open(path);
    NewTag a, b, c;
    a.add("w1", w1);
    a.add("w2", w2);
    a.add("only_a", w3);
    w.add_tag("a", std::move(a));
    b.share("w1", "a", "w1");
    b.add("w2", w2);  // dedup -> a/1
    c.share("w1", "a", "w1");
    c.add("own", Tensor::dense(DType::float32, {1}, Bytes::copy_of(std::string(4, 'x'))));
    w.add_tag("b", std::move(b));
    w.add_tag("c", std::move(c));
    w.commit();
  }
  Writer w = Writer::open(path);
  w.remove_tag("A");
  CHECK(w.tags() == std::vector<std::string>{"b", "c"});
  w.commit();
  Archive ar = Archive::open(path);
  CHECK(ar.tags() == std::vector<std::string>{"b", "c"});
  CHECK(ar.tensor("w1", "b") == w1);
  CHECK(ar.tensor("w2", "b") == w2);
  CHECK(ar.tensor("w1", "c") == w1);
  // The oldest referencing tag (b) now owns the blobs; c refers to b.
  CHECK_FALSE(ar.param("w1", "b").shared);
  CHECK(ar.param("w1", "c").shared);
  CHECK(ar.param("w1", "c").owner_tag == "b");
  for (const auto& name : ar.entry_names()) CHECK(name.rfind("a/", 0) != 0);
  CHECK(ar.verify().empty());
}

TEST_CASE("A tag that exists in any letter case is refused and changes nothing") {
  TempDir dir;
  auto path = dir / "m.zip";
  {
    Writer w = Writer::open(path);
    NewTag t;
    t.add("x", Tensor::dense(DType::int8, {1}, Bytes::copy_of(std::string("\x05"))));
    w.add_tag("Step-1", std::move(t));
    w.commit();
  }
  auto before = io_bytes(path);
  Writer w = Writer::open(path);
  try {
    w.add_tag("STEP-1", NewTag{});
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::already_exists);
    CHECK(std::string(e.what()).find("Step-1") != std::string::npos);
    // The hint names the C++ call that replaces a tag.
    CHECK(e.message().ends_with("; Writer::replace_tag replaces it"));
  }
  CHECK(io_bytes(path) == before);
}

// A second add of a tag this Writer staged is refused as staged, not as if
// the archive held it (it does not yet); a tag the archive holds is refused
// as existing, also after replace_tag or remove_tag and add_tag staged it.
TEST_CASE("Adding a tag twice in one Writer says it is staged, not in the archive") {
  TempDir dir;
  auto path = dir / "m.zip";
  auto staged_message = [](const Error& e) {
    return e.message().find("already staged in this Writer, not yet committed") !=
           std::string::npos;
  };
  Writer w = Writer::open(path);
  w.add_tag("Step-1", NewTag{});
  {
    REQUIRE_ERROR_AS(e, w.add_tag("STEP-1", NewTag{}), ErrorCode::already_exists, "'Step-1'");
    CHECK(staged_message(e));
    CHECK(e.message().find("'Step-1'") != std::string::npos);
    CHECK(e.context().archive == path.string());
    CHECK(e.context().tag == "STEP-1");
    CHECK(e.message().ends_with("; Writer::replace_tag replaces it"));
  }
  w.commit();
  Writer again = Writer::open(path);
  {
    REQUIRE_ERROR_AS(e, again.add_tag("step-1", NewTag{}), ErrorCode::already_exists,
                     "exists already");
    CHECK_FALSE(staged_message(e));
    CHECK(e.message().find("exists already") != std::string::npos);
  }
  again.replace_tag("Step-1", NewTag{});
  CHECK_THROWS_WITH_AS(again.add_tag("step-1", NewTag{}),
                       doctest::Contains("already staged in this Writer"), Error);
  again.discard();
  again.remove_tag("Step-1");
  again.add_tag("Step-1", NewTag{});
  CHECK_THROWS_WITH_AS(again.add_tag("step-1", NewTag{}),
                       doctest::Contains("already staged in this Writer"), Error);
}

TEST_CASE("A failed commit leaves the previous archive untouched") {
  TempDir dir;
  auto path = dir / "m.zip";
  {
    Writer w = Writer::open(path);
    NewTag t;
    t.add("x", Tensor::dense(DType::int8, {2}, Bytes::copy_of(std::string("ab"))));
    w.add_tag("v1", std::move(t));
    w.commit();
  }
  auto before = io_bytes(path);
  Writer w = Writer::open(path);
  NewTag t;
  t.share("y", "v1", "no-such-param");
  w.add_tag("v2", std::move(t));
  CHECK_THROWS_AS(w.commit(), Error);
  CHECK(io_bytes(path) == before);
  // No temporary files remain.
  std::size_t files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path()))
    if (e.path().filename().string().find("mztmp") != std::string::npos) ++files;
  CHECK(files == 0);
}

TEST_CASE("Invalid tags are refused with the reason") {
  TempDir dir;
  Writer w = Writer::open(dir / "m.zip");
  for (std::string bad :
       std::vector<std::string>{"", "a/b", "a\\b", "..", ".hidden", "x.", "tab\t", "CON",
                                "lpt1.txt", std::string(101, 'a'), "\xC3\xA9"}) {
    INFO("tag " << bad);
    CHECK_THROWS_AS(w.add_tag(bad, NewTag{}), Error);
  }
  CHECK_NOTHROW(w.add_tag("v1.0_rc-2+build=3@x", NewTag{}));
}

TEST_CASE("Metadata round-trips") {
  TempDir dir;
  auto path = dir / "m.zip";
  Writer w = Writer::open(path);
  Metadata m;
  m.model_name = "tiny \"mlp\"";
  m.model_version = "1.2";
  m.quantization = "none";
  m.description = "line one\nline two";
  w.update_metadata([m](Metadata& current) { current = m; });
  w.add_tag("v1", NewTag{});
  w.commit();
  Archive a = Archive::open(path);
  CHECK(a.metadata().model_name == m.model_name);
  CHECK(a.metadata().description == m.description);
  CHECK(a.metadata().format_version == 1);
  CHECK(a.params().empty());
}

TEST_CASE("Metadata that is not UTF-8 is refused at commit and the archive stays as it was") {
  TempDir dir;
  auto path = dir / "m.zip";
  {
    Writer w = Writer::open(path);
    w.add_tag("v1", NewTag{});
    w.commit();
  }
  auto read_all = [&] {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string before = read_all();
  Writer w = Writer::open(path);
  w.update_metadata([](Metadata& m) { m.model_name = "\xFF\xFE"; });
  w.add_tag("v2", NewTag{});
  try {
    w.commit();
    FAIL("commit accepted a model name that is not UTF-8");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    CHECK(std::string(e.what()).find("metadata model.name is not UTF-8") != std::string::npos);
    CHECK(std::string(e.what()).find("modelzip.toml") != std::string::npos);
  }
  CHECK(read_all() == before);
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"v1"});
}
