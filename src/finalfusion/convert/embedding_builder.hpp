// Helpers shared by the format converters: token decoding, number parsing
// and printing, and building embeddings from a word list and a matrix.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "modelzip/error.hpp"
#include "modelzip/finalfusion/convert.hpp"
#include "modelzip/finalfusion/embeddings.hpp"

namespace modelzip::finalfusion::detail {

// What `read()` returns; an Error it throws is rethrown naming `source` as
// ErrorContext::archive (unless it names one already): the readers' `source`.
template <class Read>
Embeddings read_from(std::string_view source, Read&& read) {
  try {
    return read();
  } catch (const Error& e) {
    throw e.with_context(ErrorContext{.archive = std::string(source)});
  }
}

// Turns the raw words of one conversion into valid UTF-8 by the options'
// policy, counts what it changed and checks the result (one decoder per
// conversion; not thread-safe).
class WordDecoder {
 public:
  explicit WordDecoder(const ConvertOptions& options) : options_(options) {}
  // False when `bytes` can be used as they are (valid UTF-8, and for the
  // escape policy without a backslash).
  bool needs_decoding(std::string_view bytes) const noexcept;
  // `bytes` as a word: unchanged, replaced lossily, escaped, or rejected
  // (strict: Error(corrupt, "<what> is not valid UTF-8 ...", context with
  // the offset of the first invalid byte added to context.offset)).
  std::string decode(std::string_view bytes, std::string_view what, const ErrorContext& context);
  // After all words: checks that they are distinct (Error(corrupt) naming
  // both rows, and for the lossy policy why they collided, with the context
  // word_context gives for the second of them, else `context`) and adds the
  // counts to options.report.
  void finish(std::span<const std::string> words, std::string_view what,
              const ErrorContext& context,
              const std::function<ErrorContext(std::size_t)>& word_context = {}) const;
  // `metadata` with the escape mark added when a word was escaped.
  std::optional<EmbeddingsMetadata> mark(std::optional<EmbeddingsMetadata> metadata) const;

 private:
  ConvertOptions options_;
  std::uint64_t replaced_ = 0;
  std::uint64_t escaped_ = 0;
};

// Removes leading and trailing Unicode White_Space (as Rust's str::trim).
std::string_view trim_unicode(std::string_view text) noexcept;
// Removes leading and trailing ASCII whitespace.
std::string_view trim_ascii(std::string_view text) noexcept;
// `text` without a leading UTF-8 byte order mark (EF BB BF, which Windows
// editors write first); a text file's first word or header follows it.
std::string_view without_utf8_bom(std::string_view text) noexcept;
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
// normalises rows and keeps norms when options.normalize. Calls
// decoder.finish (duplicates: Error(corrupt) naming `what`, with the
// line or offset word_context gives for a word) and marks escaped words in
// the metadata.
Embeddings simple_embeddings(std::vector<std::string> words, std::vector<float> matrix,
                             std::size_t dims, const ConvertOptions& options,
                             const WordDecoder& decoder, std::string_view what,
                             const std::function<ErrorContext(std::size_t)>& word_context);

// Why a row of `dims` components cannot be stored normalised (a unit row
// and a float32 norm): "" when it can; else a phrase naming the problem, a
// component that is not finite (its 0-based index in *component) or a norm
// beyond float32's range. Huge finite components are fine: the norm is then
// accumulated in double.
std::string unnormalizable(const float* row, std::size_t dims, std::size_t* component = nullptr);

// Ends the errors of rows that cannot be normalised: how to keep them.
inline constexpr std::string_view kKeepRowHint =
    " (read without normalizing, import --no-normalize or normalize=False, to keep the row as "
    "it is)";

// Normalises the first `rows` rows of `matrix` in place and returns their
// norms. Throws Error(corrupt) naming the row (and its word when `words`
// has it) for a row that unnormalizable() refuses; readers that know a
// line or offset check their rows first.
std::vector<float> normalize_rows(std::vector<float>& matrix, std::size_t rows, std::size_t dims,
                                  std::span<const std::string> words = {});

}  // namespace modelzip::finalfusion::detail
