// Text formats: one "word v1 ... vd" line per word, fields separated by
// ASCII whitespace; optionally preceded by a "rows dims" line.
#include <algorithm>
#include <cmath>
#include <ostream>

#include "core/fail.hpp"
#include "core/utf8.hpp"
#include "finalfusion/convert/embedding_builder.hpp"
#include "finalfusion/embeddings_state.hpp"

namespace modelzip::finalfusion {
namespace detail {
void write_stream(std::ostream& out, const std::string& text);
// Writes `header`, then a line per word, after checking every word reads back.
void write_rows_text(const Embeddings& e, std::ostream& out, const WriteOptions& options,
                     std::string_view header);
}  // namespace detail

namespace {

// Lines of `text` without their '\n' (a last line without '\n' counts).
// Built from a whole file, it leaves out a UTF-8 byte-order mark; columns
// count bytes of the file, the mark's 3 included.
class Lines {
 public:
  explicit Lines(std::string_view file)
      : text_(detail::without_utf8_bom(file)), first_skipped_(file.size() - text_.size()) {}
  bool next(std::string_view& line) {
    if (pos_ >= text_.size()) return false;
    const auto end = text_.find('\n', pos_);
    const std::size_t stop = end == std::string_view::npos ? text_.size() : end;
    line = text_.substr(pos_, stop - pos_);
    pos_ = stop == text_.size() ? stop : stop + 1;
    ++number_;
    return true;
  }
  std::uint64_t number() const noexcept { return number_; }
  // The 1-based column of byte `index` of the line last read.
  std::uint64_t column(std::size_t index) const noexcept {
    return (number_ == 1 ? first_skipped_ : 0) + std::uint64_t{index} + 1;
  }
  std::size_t remaining() const noexcept { return text_.size() - pos_; }

 private:
  std::string_view text_;
  std::size_t first_skipped_;  // bytes of the file before line 1
  std::size_t pos_ = 0;
  std::uint64_t number_ = 0;
};

using modelzip::detail::fail_corrupt;

// Reads word lines into words/matrix. `dims` is fixed when known, else set
// by the first line. With `options.normalize`, a row that cannot be normalized (a
// component that is not finite, "inf", "nan" or out of float32's range, or
// a norm beyond float32's range) is Error(corrupt) naming the line, and the
// column of the component.
void read_lines(Lines& lines, detail::WordDecoder& decoder, const ConvertOptions& options,
                std::optional<std::size_t>& dims, std::vector<std::string>& words,
                std::vector<float>& matrix) {
  std::string_view raw;
  while (lines.next(raw)) {
    const std::uint64_t number = lines.number();
    // Decode (copy) only lines that need it (the numbers are ASCII: only
    // the word changes).
    std::string decoded;
    std::string_view line = raw;
    if (decoder.needs_decoding(raw)) {
      // Strict decoding refuses the line: name the column of the first
      // invalid byte, and the word when it is there.
      const auto invalid = modelzip::detail::utf8_invalid_at(raw);
      std::string what = "line";
      if (invalid) {
        const auto word = raw.substr(0, std::min(raw.find_first_of(" \t\r\f"), raw.size()));
        what = "column " + std::to_string(lines.column(*invalid)) + ": " +
               (*invalid < word.size() ? "word '" + modelzip::detail::utf8_escape(word) + "'"
                                       : std::string("the line"));
      }
      decoded = decoder.decode(raw, what, ErrorContext{.line = number});
      line = decoded;
    }
    std::string_view rest = line;
    auto next_field = [&]() -> std::string_view {
      while (!rest.empty() && detail::is_ascii_space(rest.front())) rest.remove_prefix(1);
      std::size_t n = 0;
      while (n < rest.size() && !detail::is_ascii_space(rest[n])) ++n;
      auto field = rest.substr(0, n);
      rest.remove_prefix(n);
      return field;
    };
    auto word = next_field();
    if (word.empty()) fail_corrupt("empty line where a word was expected", {.line = number});
    std::size_t count = 0;
    for (auto field = next_field(); !field.empty(); field = next_field()) {
      auto value = detail::parse_float(field);
      if (!value)
        fail_corrupt("cannot parse vector component '" + std::string(field.substr(0, 32)) + "'",
                     {.line = number});
      if (options.normalize && !std::isfinite(*value)) {
        // Only the word may differ between `line` and `raw`: count from the end.
        const std::uint64_t column =
            lines.column(raw.size() - (line.size() - (field.data() - line.data())));
        fail_corrupt("column " + std::to_string(column) + ": component " +
                         std::to_string(count + 1) + " of word '" +
                         std::string(word.substr(0, 64)) + "' is '" +
                         std::string(field.substr(0, 32)) +
                         "', not a finite float32, and a row with it has no norm to normalize "
                         "by" +
                         std::string(detail::kKeepRowHint),
                     {.line = number});
      }
      matrix.push_back(*value);
      ++count;
    }
    if (!dims) dims = count;
    if (count != *dims)
      fail_corrupt("word '" + std::string(word.substr(0, 64)) + "' has " + std::to_string(count) +
                       " components, expected " + std::to_string(*dims),
                   {.line = number});
    if (options.normalize)
      if (const std::string problem =
              detail::unnormalizable(matrix.data() + matrix.size() - count, count);
          !problem.empty())
        fail_corrupt("word '" + std::string(word.substr(0, 64)) + "': " + problem +
                         std::string(detail::kKeepRowHint),
                     {.line = number});
    words.emplace_back(word);
  }
}

Embeddings read_text_bytes(const Bytes& data, const ConvertOptions& options) {
  Lines lines(data.as_string_view());
  std::optional<std::size_t> dims;
  std::vector<std::string> words;
  std::vector<float> matrix;
  detail::WordDecoder decoder(options);
  read_lines(lines, decoder, options, dims, words, matrix);
  if (words.empty())
    throw Error(ErrorCode::corrupt, "text embeddings without any word", ErrorContext{.line = 1});
  // Word i is on line i + 1 (every line holds a word).
  return detail::simple_embeddings(std::move(words), std::move(matrix), *dims, options, decoder,
                                   "text embeddings",
                                   [](std::size_t i) { return ErrorContext{.line = i + 1}; });
}

}  // namespace

Embeddings read_text(const Bytes& data, const ConvertOptions& options, std::string_view source) {
  return detail::read_from(source, [&] { return read_text_bytes(data, options); });
}

namespace {

Embeddings read_text_dims_bytes(const Bytes& data, const ConvertOptions& options) {
  Lines lines(data.as_string_view());
  std::string_view header;
  if (!lines.next(header)) fail_corrupt("missing the 'rows dims' line", {.line = 1});
  const auto space = header.find(' ');
  const auto rows = detail::parse_count(header.substr(0, space));
  const auto dims_value = space == std::string_view::npos
                              ? std::nullopt
                              : detail::parse_count(header.substr(space + 1));
  if (!rows || !dims_value)
    fail_corrupt("expected 'rows dims', got '" + std::string(header.substr(0, 64)) + "'",
                 {.line = 1});
  const auto declared_dims = dims_value.value();
  // Each component takes at least 2 bytes: a larger count cannot be real
  // (with 0 rows nothing else would check it, and lookups allocate dims).
  if (declared_dims > data.size())
    fail_corrupt("header declares " + std::to_string(declared_dims) +
                     " dimensions, more than the file's size",
                 {.line = 1});
  std::optional<std::size_t> dims = static_cast<std::size_t>(declared_dims);
  // Each word needs at least 2 bytes ("w\n"); cap the reservation by the input.
  std::vector<std::string> words;
  words.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(*rows, lines.remaining() / 2)));
  std::vector<float> matrix;
  detail::WordDecoder decoder(options);
  read_lines(lines, decoder, options, dims, words, matrix);
  if (words.size() != *rows)
    fail_corrupt("header declares " + std::to_string(*rows) + " words, the file has " +
                     std::to_string(words.size()),
                 {.line = lines.number()});
  // Word i is on line i + 2 (after the header, every line holds a word).
  return detail::simple_embeddings(std::move(words), std::move(matrix), *dims, options, decoder,
                                   "text embeddings",
                                   [](std::size_t i) { return ErrorContext{.line = i + 2}; });
}

}  // namespace

Embeddings read_text_dims(const Bytes& data, const ConvertOptions& options,
                          std::string_view source) {
  return detail::read_from(source, [&] { return read_text_dims_bytes(data, options); });
}

void write_text(std::ostream& out, const Embeddings& embeddings, const WriteOptions& options) {
  detail::write_rows_text(embeddings, out, options, "");
}

void write_text_dims(std::ostream& out, const Embeddings& embeddings, const WriteOptions& options) {
  detail::write_rows_text(embeddings, out, options,
                          std::to_string(embeddings.vocab().words_len()) + " " +
                              std::to_string(embeddings.dims()) + "\n");
}

}  // namespace modelzip::finalfusion
