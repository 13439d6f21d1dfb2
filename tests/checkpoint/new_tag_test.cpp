// NewTag: the names it refuses (empty, added twice), for parameters and
// updater states, also in copies and after a move, and for tags of many
// parameters.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "../zip/expect_error.hpp"
#include "checkpoint/new_tag_contents.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/error.hpp"
#include "modelzip/writer.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

Tensor one_float() {
  return Tensor::dense(DType::float32, {1}, Bytes::copy_of(std::string(4, '\0')));
}

}  // namespace

TEST_CASE("NewTag refuses a parameter name added twice, by any of its three ways") {
  NewTag t;
  t.add("w", one_float());
  t.add_embedding("e", Bytes::copy_of(std::string("x")));
  t.share("s", "old", "w");
  for (const char* name : {"w", "e", "s"}) {
    INFO("name " << name);
    {
      REQUIRE_ERROR_AS(e, t.add(name, one_float()), ErrorCode::invalid_argument,
                       "parameter '" + std::string(name) + "' is added twice");
    }
    {
      REQUIRE_ERROR_AS(e, t.add_embedding(name, Bytes::copy_of(std::string("x"))),
                       ErrorCode::invalid_argument, "is added twice");
    }
    {
      REQUIRE_ERROR_AS(e, t.share(name, "old", "w"), ErrorCode::invalid_argument, "is added twice");
    }
  }
  REQUIRE_ERROR_AS(e, t.add("", one_float()), ErrorCode::invalid_argument, "must not be empty");
  t.add("W", one_float());  // names are case-sensitive
  CHECK(NewTag::Contents::of(t).params.size() == 4);
}

TEST_CASE("NewTag refuses an updater state added twice; its key is the (variable, state) pair") {
  NewTag t;
  t.add_updater_state("ab", "c", one_float());
  t.add_updater_state("a", "bc", one_float());  // not the same key as ("ab", "c")
  t.add_updater_state("ab", "d", one_float());
  t.share_updater_state("x", "M", "old");
  t.add("ab", one_float());  // parameters and updater states are separate lists
  {
    REQUIRE_ERROR_AS(e, t.add_updater_state("ab", "c", one_float()), ErrorCode::invalid_argument,
                     "updater state 'c' of 'ab' is added twice");
  }
  {
    REQUIRE_ERROR_AS(e, t.share_updater_state("a", "bc", "old"), ErrorCode::invalid_argument,
                     "updater state 'bc' of 'a' is added twice");
  }
  {
    REQUIRE_ERROR_AS(e, t.add_updater_state("x", "M", one_float()), ErrorCode::invalid_argument,
                     "is added twice");
  }
  REQUIRE_ERROR_AS(e, t.add_updater_state("", "M", one_float()), ErrorCode::invalid_argument,
                   "must not be empty");
  CHECK(NewTag::Contents::of(t).updater_states.size() == 4);
}

TEST_CASE("A copy of a NewTag refuses the names of the original; the two grow apart") {
  NewTag original;
  original.add("w", one_float());
  original.add_updater_state("w", "M", one_float());
  NewTag copy = original;
  CHECK_THROWS_AS(copy.add("w", one_float()), Error);
  CHECK_THROWS_AS(copy.add_updater_state("w", "M", one_float()), Error);
  copy.add("only-in-copy", one_float());
  original.add("only-in-copy", one_float());  // not added to the original
  NewTag assigned;
  assigned.add("other", one_float());
  assigned = original;
  CHECK_THROWS_AS(assigned.add("only-in-copy", one_float()), Error);
  assigned.add("other", one_float());  // the assignment replaced its names

  NewTag moved = std::move(original);
  CHECK_THROWS_AS(moved.add("w", one_float()), Error);
  original.add("w", one_float());  // moved from: empty, it takes the name again
  CHECK(NewTag::Contents::of(original).params.size() == 1);
}

TEST_CASE("A tag of 20,000 parameters and updater states keeps them all, in order") {
  TempDir dir;
  NewTag t;
  constexpr int kCount = 20000;
  for (int i = 0; i < kCount; ++i) {
    t.add("layers." + std::to_string(i) + ".norm", one_float());
    t.add_updater_state("layers." + std::to_string(i) + ".norm", "M", one_float());
  }
  REQUIRE_ERROR_AS(e, t.add("layers.19999.norm", one_float()), ErrorCode::invalid_argument,
                   "'layers.19999.norm' is added twice");
  Writer w = Writer::open(dir / "m.zip", WriterOptions{.durable = false});
  w.add_tag("t", std::move(t));
  w.commit();
  Archive a = Archive::open(dir / "m.zip");
  const std::vector<ParamInfo> params = a.params("t");
  REQUIRE(params.size() == kCount);
  CHECK(params.front().name == "layers.0.norm");
  CHECK(params.back().name == "layers.19999.norm");
  CHECK(a.updater_states("t").size() == kCount);
}
