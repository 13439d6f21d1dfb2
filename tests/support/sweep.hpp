// Points of an exhaustive sweep (every kill point of a commit, every cut of
// a file), thinned under the sanitizers.
//
// The normal stage of tests/run.sh runs every sweep in full. Under
// AddressSanitizer (the sanitize stage) each trial costs several times more
// and the memory checks do not need every point again: there a sweep keeps
// the points near both ends (where formats keep their headers and writers
// their commit) and every `sanitizer_stride`-th point between them. The
// choice is made at compile time and is deterministic.
#pragma once

#include <cstdint>
#include <vector>

namespace modelzip::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kUnderSanitizers = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kUnderSanitizers = true;
#else
inline constexpr bool kUnderSanitizers = false;
#endif
#else
inline constexpr bool kUnderSanitizers = false;
#endif

// The points first..last (inclusive, ascending): all of them, or under the
// sanitizers those within `edge` of either end and every `sanitizer_stride`-th
// one between them (counted from `first`).
inline std::vector<std::uint64_t> sweep_points(std::uint64_t first, std::uint64_t last,
                                               std::uint64_t edge, std::uint64_t sanitizer_stride) {
  std::vector<std::uint64_t> out;
  if (last < first) return out;
  const std::uint64_t stride = kUnderSanitizers && sanitizer_stride > 1 ? sanitizer_stride : 1;
  for (std::uint64_t n = first;; ++n) {
    const bool near_end = n - first < edge || last - n < edge;
    if (stride == 1 || near_end || (n - first) % stride == 0) out.push_back(n);
    if (n == last) break;
  }
  return out;
}

}  // namespace modelzip::testing
