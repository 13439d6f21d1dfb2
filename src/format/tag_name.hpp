// Tag names: the rules of FORMAT.md section "Tags".
//
// A tag is 1 to 100 ASCII characters from [A-Za-z0-9._+=@-], does not start
// or end with '.', and is not a reserved Windows device name (CON, PRN, AUX,
// NUL, COM1-9, LPT1-9, in any case). Tags are compared without regard to ASCII
// case. ASCII keeps the case-insensitive comparison exact and locale-free, and
// every such tag is a valid folder name on every common file system.
#pragma once

#include <string>
#include <string_view>

namespace modelzip::format {

inline constexpr std::size_t kMaxTagLength = 100;

// Why `tag` is not a valid tag, or "" if it is.
std::string invalid_tag_reason(std::string_view tag);
// Throws Error(invalid_argument) if `tag` is invalid.
void check_tag(std::string_view tag);

std::string ascii_lower(std::string_view s);
bool same_tag(std::string_view a, std::string_view b) noexcept;

}  // namespace modelzip::format
