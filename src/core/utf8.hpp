// UTF-8 validation and lossy decoding.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace modelzip::detail {

// Byte index of the first invalid sequence (overlong forms, surrogates and
// code points above U+10FFFF are invalid), or nullopt if `text` is valid.
std::optional<std::size_t> utf8_invalid_at(std::string_view text) noexcept;
inline bool utf8_valid(std::string_view text) noexcept {
  return !utf8_invalid_at(text);
}

// `text` with every invalid sequence replaced by U+FFFD (as Rust's
// String::from_utf8_lossy does: one replacement per maximal invalid prefix).
std::string utf8_lossy(std::string_view text);

// Decodes valid UTF-8 into code points. Precondition: utf8_valid(text).
std::vector<char32_t> utf8_decode(std::string_view text);
// Appends the UTF-8 encoding of `cp` to `out`.
void utf8_append(std::string& out, char32_t cp);

}  // namespace modelzip::detail
