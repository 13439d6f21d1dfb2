// Converters between finalfusion Embeddings and other embedding formats:
// word2vec binary, word2vec/GloVe text (with and without the "rows dims"
// line), fastText .bin models and floret text vectors.
//
// Readers take the whole input as Bytes and follow the reference tools
// (finalfusion-rust's compat readers, fastText itself):
// - Words must be valid UTF-8 (Utf8Policy::strict, the default) unless
//   Utf8Policy::lossy, which replaces every maximal invalid subsequence by
//   U+FFFD (as Rust's String::from_utf8_lossy does; two words that differ
//   only in invalid bytes then collide, which is Error(corrupt) naming both
//   rows), or Utf8Policy::escape, which keeps every word reversibly:
//   "\" becomes "\\" and each byte outside a valid UTF-8 sequence "\xNN"
//   (lowercase hex); such embeddings carry the metadata key
//   modelzip.word_escape = "backslash-x" and the writers below restore the
//   original bytes (schemas/FINALFUSION.md section 11).
// - With ConvertOptions::normalize (the default), word rows are stored
//   L2-normalised and their original norms kept in the norms chunk, as
//   finalfusion does; otherwise rows are stored as read, without norms.
// - fastText: every word's vector is computed as fastText computes it (the
//   mean of the word's own input row and the rows of its character n-grams;
//   the end-of-sentence token "</s>" has no n-grams), and the n-gram bucket
//   rows are kept, so unknown words still get embeddings. Models without
//   character n-grams (maxn 0, the default of supervised models) become a
//   simple vocabulary; labels of supervised models are not words and are
//   left out; quantized models (.ftz) keep product-quantized storage when
//   they have no character n-grams, and are reconstructed to a dense matrix
//   otherwise (pruned n-gram buckets become zero rows).
// - floret: the bucket matrix with a floret vocabulary (no words).
//
// Errors: Error(corrupt) with the line (text formats) or byte offset
// (binary formats); Error(unsupported) for fastText format versions above
// 12; Error(limit_exceeded) when a quantized fastText model with character
// n-grams would expand to more than 256 times its file size.
// Sizes declared in headers are checked against the input size before any
// allocation.
//
// Thread safety: the functions share no state and may run concurrently
// (on distinct output paths when writing files).
#pragma once

#include <concepts>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string_view>

#include "modelzip/bytes.hpp"
#include "modelzip/export.hpp"
#include "modelzip/finalfusion/embeddings.hpp"

namespace modelzip::finalfusion {

enum class Utf8Policy { strict, lossy, escape };
// "strict", "lossy", "escape".
MODELZIP_API std::optional<Utf8Policy> utf8_policy_from_name(std::string_view name) noexcept;
MODELZIP_API std::string_view utf8_policy_name(Utf8Policy policy) noexcept;

// What a conversion changed, for the caller to report.
struct MODELZIP_API ConvertReport {
  std::uint64_t words_replaced = 0;  // lossy: words whose invalid bytes became U+FFFD
  std::uint64_t words_escaped = 0;   // escape: words written in the escaped form
};

struct MODELZIP_API ConvertOptions {
  Utf8Policy utf8 = Utf8Policy::strict;
  bool normalize = true;
  // Filled in (counters added to) when not null; not owned.
  ConvertReport* report = nullptr;
};

// The metadata key (a dotted TOML path) and value that mark embeddings whose
// words are in the escaped form (Utf8Policy::escape).
inline constexpr std::string_view kWordEscapeKey = "modelzip.word_escape";
inline constexpr std::string_view kWordEscapeValue = "backslash-x";
// True when `embeddings` carry that mark.
MODELZIP_API bool words_escaped(const Embeddings& embeddings) noexcept;
// The original bytes of a word of such embeddings (the word itself for
// other embeddings). Throws Error(corrupt) for a word that is not in the
// escaped form.
MODELZIP_API std::string original_word(const Embeddings& embeddings, std::string_view word);

// Each reader takes `source`, what `data` is (a file name, a URL): errors
// name it as ErrorContext::archive, as load() names the path; empty (the
// default), they name no file.
// word2vec binary: "rows dims\n", then per row: the word, a space, dims f32
// little-endian (usually followed by '\n'). Words are trimmed of
// surrounding whitespace. Bytes after the last row are ignored.
MODELZIP_API Embeddings read_word2vec_binary(const Bytes& data, const ConvertOptions& options = {},
                                             std::string_view source = {});
// Text, one "word v1 v2 ... vd" line per word, fields separated by ASCII
// whitespace (GloVe). Every line must have the same number of components.
MODELZIP_API Embeddings read_text(const Bytes& data, const ConvertOptions& options = {},
                                  std::string_view source = {});
// The same preceded by a "rows dims" line (word2vec text output).
MODELZIP_API Embeddings read_text_dims(const Bytes& data, const ConvertOptions& options = {},
                                       std::string_view source = {});
// A fastText model (.bin, format version <= 12).
MODELZIP_API Embeddings read_fasttext(const Bytes& data, const ConvertOptions& options = {},
                                      std::string_view source = {});
// floret text vectors: "n_buckets dims min_n max_n n_hashes seed bow eow",
// then n_buckets lines "index v1 ... vd".
MODELZIP_API Embeddings read_floret_text(const Bytes& data, std::string_view source = {});

// How the writers below and store() write embeddings.
struct MODELZIP_API WriteOptions {
  // ConvertOptions::normalize seen from the writing side. false (the
  // default): each row multiplied by its norm (if the embeddings have norms)
  // to restore the original vectors, which is what word2vec and GloVe files
  // hold (the reference tools write the vectors they trained, not unit
  // rows), as `modelzip export` and Python's Embeddings.save write them.
  // true: the rows as stored (unit rows when they were normalized;
  // `export --normalized`). A finalfusion file keeps rows and norms as
  // stored either way.
  bool normalize = false;
  // store() only: the file (and the rename of it) is fsynced before store
  // returns.
  bool durable = true;
};

// Writers of the word rows (subword rows are not part of these formats),
// with `options.normalize` (WriteOptions). Words are written as original_word() gives them. Numbers
// are printed as the shortest decimal that reads back to the same float, without exponent (as Rust
// prints f32). Throw Error(io) when the stream fails, and Error(invalid_argument), before writing
// anything, for a word the format's reader would not give back (text: an empty word or one with
// ASCII whitespace; word2vec: a space, or Unicode whitespace at either end) and for a component
// to be written that is not finite (NaN, inf: those formats' readers normalize the vectors, and
// fastText's text reader does not parse them), naming its row, word and component. The destination
// comes first, as in every writer of the API (convert::write_npy...).
MODELZIP_API void write_word2vec_binary(std::ostream& out, const Embeddings& embeddings,
                                        const WriteOptions& options = {});
MODELZIP_API void write_text(std::ostream& out, const Embeddings& embeddings,
                             const WriteOptions& options = {});
MODELZIP_API void write_text_dims(std::ostream& out, const Embeddings& embeddings,
                                  const WriteOptions& options = {});
// floret embeddings only (Error(invalid_argument) otherwise).
MODELZIP_API void write_floret_text(std::ostream& out, const Embeddings& embeddings);

enum class EmbeddingFormat { finalfusion, word2vec_binary, text, text_dims, fasttext, floret_text };
// "finalfusion", "word2vec", "text", "textdims", "fasttext", "floret".
MODELZIP_API std::optional<EmbeddingFormat> embedding_format_from_name(
    std::string_view name) noexcept;
MODELZIP_API std::string_view embedding_format_name(EmbeddingFormat format) noexcept;
// The format of a file from its first bytes (`head`, up to 4 KiB is enough)
// and its extension, as `modelzip import` decides: "FiFu" -> finalfusion;
// fastText's magic, or the extension .ftz -> fasttext; .bin -> word2vec;
// .txt, .vec, .w2v -> textdims when the first line is "rows dims", else
// text. nullopt for anything else.
MODELZIP_API std::optional<EmbeddingFormat> detect_embedding_format(
    const std::filesystem::path& path, std::string_view head) noexcept;
// The format `export` writes for an output extension: .fifu -> finalfusion,
// .bin -> word2vec, .txt -> text (GloVe, no dims line), .vec -> textdims
// (fastText's .vec layout); nullopt otherwise.
MODELZIP_API std::optional<EmbeddingFormat> embedding_format_for_extension(
    const std::filesystem::path& path) noexcept;

// Reads a file in any format (finalfusion files are memory-mapped, the
// options do not apply to them). Errors name the path.
MODELZIP_API Embeddings load(const std::filesystem::path& path, EmbeddingFormat format,
                             const ConvertOptions& options = {});
// Writes `embeddings` to `path` in `format` (not fasttext: Error(unsupported))
// through a temporary file renamed over the target, the one way to write a
// file: a .fifu is EmbeddingFormat::finalfusion (Embeddings::write writes
// one to a stream). `options` as for the writers (WriteOptions).
MODELZIP_API void store(const std::filesystem::path& path, const Embeddings& embeddings,
                        EmbeddingFormat format, const WriteOptions& options = {});

#ifndef MODELZIP_NO_DEPRECATED
// The spellings of 0.1, removed in 0.3 (docs/cpp.md, "Changes in 0.2";
// define MODELZIP_NO_DEPRECATED to drop these now).
// The writers' `bool unnormalize` had the polarity opposite to
// ConvertOptions::normalize; a bool argument still means unnormalize here
// (templates, so that `{}` picks WriteOptions).
template <std::same_as<bool> Bool>
[[deprecated(
    "use write_word2vec_binary(out, embeddings, WriteOptions{.normalize = "
    "!unnormalize})")]] inline void
write_word2vec_binary(std::ostream& out, const Embeddings& embeddings, Bool unnormalize) {
  write_word2vec_binary(out, embeddings, WriteOptions{.normalize = !unnormalize});
}
template <std::same_as<bool> Bool>
[[deprecated(
    "use write_text(out, embeddings, WriteOptions{.normalize = !unnormalize})")]] inline void
write_text(std::ostream& out, const Embeddings& embeddings, Bool unnormalize) {
  write_text(out, embeddings, WriteOptions{.normalize = !unnormalize});
}
template <std::same_as<bool> Bool>
[[deprecated(
    "use write_text_dims(out, embeddings, WriteOptions{.normalize = !unnormalize})")]] inline void
write_text_dims(std::ostream& out, const Embeddings& embeddings, Bool unnormalize) {
  write_text_dims(out, embeddings, WriteOptions{.normalize = !unnormalize});
}
template <std::same_as<bool> Bool>
[[deprecated(
    "use store(path, embeddings, format, WriteOptions{.normalize = !unnormalize})")]] inline void
store(const std::filesystem::path& path, const Embeddings& embeddings, EmbeddingFormat format,
      Bool unnormalize) {
  store(path, embeddings, format, WriteOptions{.normalize = !unnormalize});
}
// With `using namespace` of both modelzip::convert and
// modelzip::finalfusion, Format named two types.
using Format [[deprecated("use finalfusion::EmbeddingFormat")]] = EmbeddingFormat;
[[deprecated("use finalfusion::embedding_format_from_name")]] inline std::optional<EmbeddingFormat>
format_from_name(std::string_view name) noexcept {
  return embedding_format_from_name(name);
}
[[deprecated("use finalfusion::embedding_format_name")]] inline std::string_view format_name(
    EmbeddingFormat format) noexcept {
  return embedding_format_name(format);
}
[[deprecated("use finalfusion::detect_embedding_format")]] inline std::optional<EmbeddingFormat>
detect_format(const std::filesystem::path& path, std::string_view head) noexcept {
  return detect_embedding_format(path, head);
}
[[deprecated(
    "use finalfusion::embedding_format_for_extension")]] inline std::optional<EmbeddingFormat>
format_for_extension(const std::filesystem::path& path) noexcept {
  return embedding_format_for_extension(path);
}
#endif

}  // namespace modelzip::finalfusion
