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

// The reversible "escape" form of arbitrary bytes as valid UTF-8 (the
// converters' Utf8Policy::escape, schemas/FINALFUSION.md section 11): every
// backslash becomes two backslashes, every byte that is not part of a valid
// UTF-8 sequence becomes "\x" and two lowercase hex digits, everything else
// is kept. utf8_unescape(utf8_escape(b)) == b for all bytes b.
std::string utf8_escape(std::string_view bytes);
// True when utf8_escape would change `bytes` (invalid UTF-8 or a backslash).
bool utf8_needs_escape(std::string_view bytes) noexcept;
// The bytes an escaped text stands for; nullopt when `text` contains a
// backslash that is not followed by a backslash or by "x" and two hex
// digits (either case).
std::optional<std::string> utf8_unescape(std::string_view text);

// Decodes valid UTF-8 into code points. Precondition: utf8_valid(text).
std::vector<char32_t> utf8_decode(std::string_view text);
// Appends the UTF-8 encoding of `cp` to `out`.
void utf8_append(std::string& out, char32_t cp);

}  // namespace modelzip::detail
