// The committed golden archive must keep loading with the same meaning, and
// today's writer must still produce it byte for byte (a failure here means
// the format changed: decide whether that was intended, see make_golden.cpp).
#include <doctest/doctest.h>

#include "golden_model.hpp"
#include "modelzip/archive.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {
std::filesystem::path golden() {
  return tests_dir() / "golden" / "core" / "v1.zip";
}
// The same archive as written by modelzip 0.1.0 before tags.txt became the
// last entry (tags.txt second): readers keep accepting that layout.
std::filesystem::path golden_tags_first() {
  return tests_dir() / "golden" / "core" / "v1-tags-first.zip";
}
}  // namespace

TEST_CASE("Golden archive v1 loads with the expected content") {
  for (const auto& file : {golden(), golden_tags_first()}) {
    INFO(file);
    Archive a = Archive::open(file);
    CHECK(a.tags() == std::vector<std::string>{"base", "Fine-Tune"});
    CHECK(a.metadata().format_version == 1);
    CHECK(a.metadata().model_name == "golden");
    CHECK(a.metadata().description == "format regression archive");

    Tensor m = a.tensor("matrix", "base");
    CHECK(m.dtype() == DType::float32);
    CHECK(m.shape() == Shape{2, 3});
    CHECK(std::vector<float>(m.as<float>().begin(), m.as<float>().end()) ==
          std::vector<float>{1, 2, 3, 4, 5, 6});
    CHECK(a.tensor("count", "base").as<std::int64_t>()[0] == 42);
    CHECK(a.tensor("count", "base").rank() == 0);
    Tensor words = a.tensor("words", "base");
    CHECK(words.string_at(0) == "a");
    CHECK(words.string_at(1) == "b c");
    Tensor sparse = a.tensor("sparse", "base");
    CHECK(sparse.layout() == Layout::sparse_coo);
    CHECK(sparse.nnz() == 2);
    CHECK(sparse.as<double>()[1] == -2.0);
    CHECK(std::vector<std::int64_t>(reinterpret_cast<const std::int64_t*>(sparse.indices().data()),
                                    reinterpret_cast<const std::int64_t*>(sparse.indices().data()) +
                                        4) == std::vector<std::int64_t>{0, 1, 2, 2});
    CHECK(a.tensor("flags", "base").as<std::uint8_t>()[0] == 1);
    CHECK(a.tensor("bf16", "base").as<std::uint16_t>()[1] == 0x4000);
    CHECK(a.tensor("half", "base").as<std::uint16_t>()[0] == 0x3C00);
    CHECK(a.tensor("empty", "base").shape() == Shape{0, 4});
    CHECK(a.tensor(kOddName, "base").as<std::int16_t>()[0] == -1);

    // The second tag: one explicit share, one dedup, one deflated blob.
    auto p = a.params("fine-tune");
    REQUIRE(p.size() == 3);
    CHECK(p[0].name == "matrix");
    CHECK(p[0].blob == "base/params/0.fb");
    CHECK(p[1].compressed);
    CHECK(a.tensor("count", "Fine-Tune").as<std::int64_t>()[0] == 43);
    CHECK(p[2].blob == "base/params/2.fb");
    auto states = a.updater_states("Fine-Tune");
    REQUIRE(states.size() == 2);
    CHECK(states[0].state == "M");
    CHECK(a.updater_state("matrix", "V", "Fine-Tune").as<float>()[5] == 1.0f);
    CHECK(a.verify().empty());
  }
}

TEST_CASE("Golden archive v1: the text entries read as specified") {
  for (const auto& file : {golden(), golden_tags_first()}) {
    INFO(file);
    Archive a = Archive::open(file);
    CHECK(a.entry("tags.txt").as_string_view() == "base\nFine-Tune\n");
    CHECK(a.entry("Fine-Tune/params.txt").as_string_view() ==
          "matrix base/0\ncount 0\nwords base/2\n");
    CHECK(a.entry("Fine-Tune/updater.txt").as_string_view() == "matrix M 0\nmatrix V 1\n");
    std::string params(a.entry("base/params.txt").as_string_view());
    CHECK(params.find("a%20b/c%23%25%0A\xC3\xA9 8\n") != std::string::npos);
  }
}

TEST_CASE("Today's writer reproduces the golden archive entry for entry") {
  TempDir dir;
  write_golden(dir / "v1.zip");
  Archive now = Archive::open(dir / "v1.zip");
  Archive then = Archive::open(golden());
  REQUIRE(now.entry_names() == then.entry_names());
  for (const auto& name : then.entry_names()) {
    if (name == "modelzip.toml") continue;  // names the writer's version
    INFO(name);
    CHECK(now.entry(name).as_string_view() == then.entry(name).as_string_view());
  }
  CHECK(std::filesystem::file_size(dir / "v1.zip") == std::filesystem::file_size(golden()));
}
