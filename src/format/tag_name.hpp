// Tag names: the rules of FORMAT.md section "Tags".
//
// A tag is 1 to 100 ASCII characters from [A-Za-z0-9._+=@-], does not start
// or end with '.', and is not a reserved Windows device name (CON, PRN, AUX,
// NUL, COM1-9, LPT1-9, in any case). Tags are compared without regard to ASCII
// case. ASCII keeps the case-insensitive comparison exact and locale-free, and
// every such tag is a valid folder name on every common file system.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "modelzip/error.hpp"

namespace modelzip::format {

inline constexpr std::size_t kMaxTagLength = 100;

// Why `tag` is not a valid tag, or "" if it is.
std::string invalid_tag_reason(std::string_view tag);
// Throws Error(invalid_argument) if `tag` is invalid.
void check_tag(std::string_view tag);

std::string ascii_lower(std::string_view s);
bool same_tag(std::string_view a, std::string_view b) noexcept;

// How the C++ Writer replaces an existing tag: the hint tag_exists gives.
inline constexpr std::string_view kWriterReplaceHint = "Writer::replace_tag replaces it";
// The same for a collective commit (CollectiveWriter, its own error).
inline constexpr std::string_view kCollectiveReplaceHint =
    "CollectiveCommitOptions::replace replaces it";

// Error(already_exists) for adding a tag when the archive holds `existing`
// (the same name in any letter case). Its message ends with
// kWriterReplaceHint; a front end whose callers replace tags another way
// (an option, a flag) swaps it for its own with with_replace_hint where it
// makes the call, so that the hint names what its user can pass.
// Header-only, as the Java bindings link only the public library.
inline Error tag_exists(std::string_view existing, ErrorContext context) {
  return Error(ErrorCode::already_exists,
               "tag '" + std::string(existing) + "' exists already (tags ignore case); " +
                   std::string(kWriterReplaceHint),
               std::move(context));
}

// Error(already_exists) for adding a tag that an earlier add_tag or
// replace_tag of the same Writer staged as `staged` (the same name in any
// letter case), which is not in the archive yet. Ends with
// kWriterReplaceHint, as tag_exists does.
inline Error tag_staged(std::string_view staged, ErrorContext context) {
  return Error(ErrorCode::already_exists,
               "tag '" + std::string(staged) +
                   "' is already staged in this Writer, not yet committed (tags ignore case); " +
                   std::string(kWriterReplaceHint),
               std::move(context));
}

// Writer::keep_last's rule, also checked where a keep_last is taken before a
// Writer exists (background saves): Error(invalid_argument) for 0.
inline void check_keep_last(std::size_t n, ErrorContext context) {
  if (n == 0)
    throw Error(ErrorCode::invalid_argument,
                "keep_last needs at least 1 tag to keep (remove tags one by one to empty an "
                "archive)",
                std::move(context));
}

// `e` with its replace hint swapped for `hint` ("" drops it) if `e` came
// from tag_exists or a collective commit's "exists already"; otherwise `e`
// unchanged.
inline Error with_replace_hint(const Error& e, std::string_view hint) {
  const std::string& message = e.message();
  if (e.code() != ErrorCode::already_exists) return e;
  for (std::string_view known : {kWriterReplaceHint, kCollectiveReplaceHint}) {
    const std::string suffix = "; " + std::string(known);
    if (!message.ends_with(suffix)) continue;
    std::string reworded = message.substr(0, message.size() - suffix.size());
    if (!hint.empty()) reworded += "; " + std::string(hint);
    return e.reworded(std::move(reworded), e.context());
  }
  return e;
}

}  // namespace modelzip::format
