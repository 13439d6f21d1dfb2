#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/suggestions.hpp"

using namespace modelzip::detail;

namespace {

using Names = std::vector<std::string>;

Names closest(std::string_view typed, std::vector<std::string_view> candidates) {
  return closest_names(typed, candidates);
}

}  // namespace

TEST_CASE("Suggestions: one deletion, insertion, substitution or adjacent swap") {
  const std::vector<std::string_view> commands{"tags", "ls", "info", "cat", "diff", "verify"};
  CHECK(closest("lss", commands) == Names{"ls"});
  CHECK(closest("tag", commands) == Names{"tags"});
  CHECK(closest("vreify", commands) == Names{"verify"});
  CHECK(closest("dif", commands) == Names{"diff"});
  CHECK(closest("--tga", std::vector<std::string_view>{"--tag", "--json", "--npy"}) ==
        Names{"--tag"});
  // The swap of two adjacent letters costs one edit, not two: a three-letter
  // name allows one edit.
  CHECK(closest("sl", commands) == Names{"ls"});
  CHECK(closest("act", commands) == Names{"cat"});
  CHECK(closest("tca", commands).empty());  // two edits from "cat"
}

TEST_CASE("Suggestions: the closest candidates only, in their order, at most three") {
  const std::vector<std::string_view> tags{"step-1", "step-9", "step-98", "step-100"};
  CHECK(closest("step-99", tags) == Names{"step-9", "step-98"});
  CHECK(closest("step-10", tags) == Names{"step-1", "step-100"});
  CHECK(closest("STEP-1X", tags) == Names{"step-1"});  // letter case is no edit
  const std::vector<std::string_view> many{"a1", "a2", "a3", "a4"};
  CHECK(closest("a0", many) == Names{"a1", "a2", "a3"});
}

TEST_CASE("Suggestions: nothing for far names, exact names, empty input or too many candidates") {
  const std::vector<std::string_view> commands{"tags", "ls", "export", "import"};
  CHECK(closest("xyz", commands).empty());
  CHECK(closest("quantise-all", commands).empty());
  CHECK(closest("", commands).empty());
  CHECK(closest("Tags", commands).empty());  // exists, in another letter case
  CHECK(closest("ls", std::vector<std::string_view>{}).empty());
  // Short names allow one edit, longer ones up to three.
  CHECK(closest("xs", std::vector<std::string_view>{"ls"}) == Names{"ls"});
  CHECK(closest("xy", std::vector<std::string_view>{"ls"}).empty());
  CHECK(closest("embedding.wieght2", std::vector<std::string_view>{"embedding.weight"}) ==
        Names{"embedding.weight"});
  std::vector<std::string> names(kMaxSuggestionCandidates + 1, "w");
  std::vector<std::string_view> views(names.begin(), names.end());
  CHECK(closest("x", views).empty());
  views.pop_back();
  CHECK(closest("x", views) == Names{"w"});
}

TEST_CASE("did_you_mean formats the suggestions for an error message") {
  const std::vector<std::string_view> tags{"step-1", "step-9", "step-98"};
  CHECK(did_you_mean("step-99", tags) == " (did you mean 'step-9' or 'step-98'?)");
  CHECK(did_you_mean("step-2", std::vector<std::string_view>{"step-1"}) ==
        " (did you mean 'step-1'?)");
  CHECK(did_you_mean("a0", std::vector<std::string_view>{"a1", "a2", "a3"}) ==
        " (did you mean 'a1', 'a2' or 'a3'?)");
  CHECK(did_you_mean("zzz", tags).empty());
}
