// "Did you mean ...?" for a name the user typed that does not exist (a
// command, option, tag or parameter), as git suggests commands.
//
// Closeness is the optimal string alignment distance (Levenshtein plus the
// swap of two adjacent characters, so "--tga" is one edit from "--tag"),
// with ASCII letters compared without regard to case. A candidate is close
// enough within max(1, min(3, typed.size() / 3)) edits.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace modelzip::detail {

// More candidates than this get no suggestion: an error path must stay cheap
// for an archive of millions of parameters.
inline constexpr std::size_t kMaxSuggestionCandidates = 100'000;

// The candidates at the smallest distance from `typed`, if it is close
// enough (see above), in the order given, at most three; none for an empty
// `typed` or an exact match, which is not a typo.
std::vector<std::string> closest_names(std::string_view typed,
                                       std::span<const std::string_view> candidates);

// " (did you mean 'a'?)", " (did you mean 'a' or 'b'?)", or "" when nothing
// is close: for the end of an error message.
std::string did_you_mean(std::string_view typed, std::span<const std::string_view> candidates);
std::string did_you_mean(std::string_view typed, std::span<const std::string> candidates);

}  // namespace modelzip::detail
