// Helpers shared by the format converters: token decoding, number parsing
// and printing, and building embeddings from a word list and a matrix.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "modelzip/error.hpp"
#include "modelzip/finalfusion.hpp"
#include "modelzip/finalfusion_convert.hpp"

namespace modelzip::finalfusion::detail {

// `bytes` as UTF-8: unchanged if valid; replaced lossily or rejected
// (Error(corrupt, what..., context)) otherwise.
std::string decode_token(std::string_view bytes, Utf8Policy policy, std::string_view what,
                         const ErrorContext& context);

// Removes leading and trailing Unicode White_Space (as Rust's str::trim).
std::string_view trim_unicode(std::string_view text) noexcept;
// Removes leading and trailing ASCII whitespace.
std::string_view trim_ascii(std::string_view text) noexcept;
inline bool is_ascii_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

// A decimal unsigned integer (surrounding ASCII whitespace allowed).
std::optional<std::uint64_t> parse_count(std::string_view text) noexcept;
// A float as Rust's f32::from_str reads it: decimal or exponent notation,
// optional sign, "inf", "infinity", "nan" (any case).
std::optional<float> parse_float(std::string_view text) noexcept;
// Appends the shortest decimal that reads back as `value`, without exponent
// ("NaN", "inf", "-inf" for non-finite values), as Rust's Display for f32.
void append_float(std::string& out, float value);

// Words + row-major matrix -> embeddings with a simple vocabulary;
// normalises rows and keeps norms when `normalize`. Duplicate words give
// Error(corrupt) naming `what`.
Embeddings simple_embeddings(std::vector<std::string> words, std::vector<float> matrix,
                             std::size_t dims, bool normalize, std::string_view what);

// Normalises the first `rows` rows of `matrix` in place and returns their norms.
std::vector<float> normalize_rows(std::vector<float>& matrix, std::size_t rows, std::size_t dims);

}  // namespace modelzip::finalfusion::detail
