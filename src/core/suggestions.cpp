#include "core/suggestions.hpp"

#include <algorithm>
#include <limits>

#include "core/printable.hpp"

namespace modelzip::detail {
namespace {

char fold(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// Optimal string alignment distance of a and b, or `limit + 1` as soon as it
// must exceed `limit` (then the answer is only "too far").
std::size_t distance(std::string_view a, std::string_view b, std::size_t limit) {
  const std::size_t too_far = limit + 1;
  if ((a.size() > b.size() ? a.size() - b.size() : b.size() - a.size()) > limit) return too_far;
  // Three rows of the dynamic programme: i-2, i-1 and i.
  std::vector<std::size_t> before(b.size() + 1), previous(b.size() + 1), current(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  std::size_t previous_min = 0;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    std::size_t row_min = current[0];
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const bool same = fold(a[i - 1]) == fold(b[j - 1]);
      std::size_t d = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + !same});
      if (i > 1 && j > 1 && fold(a[i - 1]) == fold(b[j - 2]) && fold(a[i - 2]) == fold(b[j - 1]))
        d = std::min(d, before[j - 2] + 1);
      current[j] = d;
      row_min = std::min(row_min, d);
    }
    // A path through row i+1 comes from row i, or from row i-1 by a swap.
    if (row_min > limit && previous_min > limit) return too_far;
    previous_min = row_min;
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return std::min(previous[b.size()], too_far);
}

}  // namespace

std::vector<std::string> closest_names(std::string_view typed,
                                       std::span<const std::string_view> candidates) {
  std::vector<std::string> best;
  if (typed.empty() || candidates.size() > kMaxSuggestionCandidates) return best;
  std::size_t best_distance = std::max<std::size_t>(1, std::min<std::size_t>(3, typed.size() / 3));
  for (std::string_view c : candidates) {
    const std::size_t d = distance(typed, c, best_distance);
    if (d == 0) return {};  // the name exists (in another letter case): not a typo
    if (d > best_distance) continue;
    if (d < best_distance) {
      best.clear();
      best_distance = d;
    }
    if (best.size() < 3 && std::find(best.begin(), best.end(), c) == best.end())
      best.emplace_back(c);
  }
  return best;
}

std::string did_you_mean(std::string_view typed, std::span<const std::string_view> candidates) {
  const std::vector<std::string> names = closest_names(typed, candidates);
  if (names.empty()) return {};
  std::string text = " (did you mean ";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i) text += i + 1 == names.size() ? " or " : ", ";
    text += quote_name(names[i]);
  }
  return text + "?)";
}

std::string did_you_mean(std::string_view typed, std::span<const std::string> candidates) {
  if (candidates.size() > kMaxSuggestionCandidates) return {};
  const std::vector<std::string_view> views(candidates.begin(), candidates.end());
  return did_you_mean(typed, views);
}

}  // namespace modelzip::detail
