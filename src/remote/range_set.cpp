#include "remote/range_set.hpp"

#include <algorithm>

namespace modelzip::remote {

void RangeSet::add(std::uint64_t begin, std::uint64_t end) {
  if (begin >= end) return;
  auto it = by_begin_.upper_bound(begin);
  if (it != by_begin_.begin() && std::prev(it)->second >= begin) {
    --it;
    begin = it->first;
    end = std::max(end, it->second);
  }
  while (it != by_begin_.end() && it->first <= end) {
    end = std::max(end, it->second);
    it = by_begin_.erase(it);
  }
  by_begin_.emplace(begin, end);
}

std::vector<io::ByteRange> RangeSet::missing(std::uint64_t begin, std::uint64_t end) const {
  std::vector<io::ByteRange> out;
  auto it = by_begin_.upper_bound(begin);
  if (it != by_begin_.begin()) --it;
  std::uint64_t at = begin;
  for (; it != by_begin_.end() && at < end; ++it) {
    if (it->second <= at) continue;
    if (it->first >= end) break;
    if (it->first > at) out.push_back({at, it->first - at});
    at = std::max(at, it->second);
  }
  if (at < end) out.push_back({at, end - at});
  return out;
}

std::uint64_t RangeSet::total() const noexcept {
  std::uint64_t sum = 0;
  for (const auto& [b, e] : by_begin_) sum += e - b;
  return sum;
}

std::vector<io::ByteRange> plan_requests(const RangeSet& have,
                                         std::span<const io::ByteRange> wanted, std::uint64_t size,
                                         std::uint64_t max_gap, std::uint64_t max_request) {
  std::vector<io::ByteRange> gaps;
  for (const auto& r : wanted) {
    if (r.offset >= size || r.length == 0) continue;
    const std::uint64_t end = r.offset + std::min(r.length, size - r.offset);
    for (const auto& m : have.missing(r.offset, end)) gaps.push_back(m);
  }
  std::sort(gaps.begin(), gaps.end(),
            [](const io::ByteRange& a, const io::ByteRange& b) { return a.offset < b.offset; });
  std::vector<io::ByteRange> merged;
  for (const auto& g : gaps) {
    if (!merged.empty()) {
      io::ByteRange& last = merged.back();
      const std::uint64_t last_end = last.offset + last.length;
      if (g.offset <= last_end + max_gap) {
        last.length = std::max(last_end, g.offset + g.length) - last.offset;
        continue;
      }
    }
    merged.push_back(g);
  }
  std::vector<io::ByteRange> out;
  for (const auto& m : merged)
    for (std::uint64_t done = 0; done < m.length; done += max_request)
      out.push_back({m.offset + done, std::min(max_request, m.length - done)});
  return out;
}

}  // namespace modelzip::remote
