#include <doctest/doctest.h>

#include "modelzip/archive.hpp"
#include "modelzip/error.hpp"
#include "modelzip/writer.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;

TEST_CASE("Progress is reported and a cancelled save changes nothing") {
  TempDir dir;
  auto path = dir / "m.zip";
  std::mt19937_64 rng(5);
  Bytes big = random_bytes(rng, 8 << 20);
  {
    NewTag t;
    t.add("w", Tensor::dense(DType::uint8, {8 << 20}, big));
    std::vector<Progress> seen;
    Writer w = Writer::open(path, WriterOptions{.progress = [&](const Progress& p) {
                              seen.push_back(p);
                              return true;
                            }});
    w.add_tag("v1", std::move(t));
    w.commit();
    REQUIRE(seen.size() >= 2);
    for (std::size_t i = 1; i < seen.size(); ++i)
      CHECK(seen[i].bytes_done >= seen[i - 1].bytes_done);
    CHECK(seen.back().bytes_done == seen.back().bytes_total);
    CHECK(seen.back().bytes_total >= (8u << 20));
  }
  auto before = io_bytes(path);
  NewTag t;
  t.add("w2", Tensor::dense(DType::uint8, {8 << 20}, random_bytes(rng, 8 << 20)));
  Writer w = Writer::open(path, WriterOptions{.progress = [](const Progress& p) {
                            return p.bytes_done < p.bytes_total / 2;
                          }});
  w.add_tag("v2", std::move(t));
  try {
    w.commit();
    FAIL("the save was not cancelled");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::cancelled);
  }
  CHECK(io_bytes(path) == before);
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"v1"});
}
