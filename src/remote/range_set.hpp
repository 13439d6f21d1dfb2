// A set of byte ranges [begin, end) kept merged, for what a remote archive's
// cache file holds. Not thread-safe (RemoteSource guards it).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "io/byte_source.hpp"

namespace modelzip::remote {

class RangeSet {
 public:
  // Adds [begin, end), merging with touching or overlapping ranges.
  void add(std::uint64_t begin, std::uint64_t end);
  // The parts of [begin, end) not in the set, in order.
  std::vector<io::ByteRange> missing(std::uint64_t begin, std::uint64_t end) const;
  bool contains(std::uint64_t begin, std::uint64_t end) const {
    return missing(begin, end).empty();
  }
  std::uint64_t total() const noexcept;
  const std::map<std::uint64_t, std::uint64_t>& ranges() const noexcept { return by_begin_; }

 private:
  std::map<std::uint64_t, std::uint64_t> by_begin_;  // begin -> end, disjoint, not touching
};

// The requests for `wanted` ranges (clipped to `size`) that `have` lacks:
// sorted, gaps of at most `max_gap` bytes fetched along (bounded over-read
// for fewer round trips), each request at most `max_request` bytes long.
std::vector<io::ByteRange> plan_requests(const RangeSet& have,
                                         std::span<const io::ByteRange> wanted, std::uint64_t size,
                                         std::uint64_t max_gap, std::uint64_t max_request);

}  // namespace modelzip::remote
