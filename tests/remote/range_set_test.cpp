// remote/range_set: merging of fetched ranges and the request plan (missing
// parts only, bounded gaps coalesced, long runs cut), with expectations
// worked out by hand.
#include <doctest/doctest.h>

#include <vector>

#include "remote/range_set.hpp"

using namespace modelzip;
using modelzip::io::ByteRange;
using modelzip::remote::plan_requests;
using modelzip::remote::RangeSet;

namespace {
std::vector<std::pair<std::uint64_t, std::uint64_t>> pairs(const std::vector<ByteRange>& v) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  for (const auto& r : v) out.emplace_back(r.offset, r.length);
  return out;
}
using P = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
}  // namespace

TEST_CASE("RangeSet merges touching and overlapping ranges") {
  RangeSet s;
  s.add(10, 20);
  s.add(30, 40);
  CHECK(s.ranges().size() == 2);
  s.add(20, 30);  // touches both
  REQUIRE(s.ranges().size() == 1);
  CHECK(s.ranges().begin()->first == 10);
  CHECK(s.ranges().begin()->second == 40);
  s.add(5, 12);
  s.add(38, 50);
  s.add(60, 60);  // empty: ignored
  CHECK(s.total() == 45);
  CHECK(s.contains(5, 50));
  CHECK_FALSE(s.contains(4, 6));
  CHECK(pairs(s.missing(0, 70)) == P{{0, 5}, {50, 20}});
  CHECK(pairs(s.missing(7, 9)).empty());
}

TEST_CASE("plan_requests: only what is missing, gaps up to max_gap fetched along") {
  RangeSet have;
  have.add(100, 200);
  std::vector<ByteRange> want{{150, 100}, {0, 10}, {300, 5}, {1000, 10}, {5000, 1}};
  // Missing: [0,10) [200,250) [300,305) [1000,1010) [5000,5001); gap 100.
  CHECK(pairs(plan_requests(have, want, 10'000, 100, 1 << 20)) ==
        P{{0, 10}, {200, 105}, {1000, 10}, {5000, 1}});
  // Gap 0: nothing coalesced except touching parts.
  CHECK(pairs(plan_requests(have, want, 10'000, 0, 1 << 20)) ==
        P{{0, 10}, {200, 50}, {300, 5}, {1000, 10}, {5000, 1}});
}

TEST_CASE("plan_requests clips to the size and cuts long runs") {
  RangeSet none;
  std::vector<ByteRange> want{{90, 50}, {200, 5}, {0, 0}};
  CHECK(pairs(plan_requests(none, want, 100, 0, 1 << 20)) == P{{90, 10}});
  std::vector<ByteRange> big{{0, 25}};
  CHECK(pairs(plan_requests(none, big, 100, 0, 10)) == P{{0, 10}, {10, 10}, {20, 5}});
}
