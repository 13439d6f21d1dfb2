// word2vec binary format: "rows dims\n", then per row the word, a space and
// dims little-endian f32 (writers add '\n' after each row; readers trim the
// word, which removes it).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <ostream>

#include "core/checked.hpp"
#include "core/utf8.hpp"
#include "finalfusion/convert/embedding_builder.hpp"
#include "finalfusion/embeddings_state.hpp"

namespace modelzip::finalfusion {

using modelzip::detail::ByteReader;

namespace {

// Reads up to (not including) `delimiter` and skips the delimiter.
std::string_view read_until(ByteReader& reader, char delimiter, std::string_view what) {
  const auto rest = reader.all().subspan(reader.position());
  // memchr needs a valid pointer even for 0 bytes; an empty input has none.
  const void* hit = rest.empty() ? nullptr : std::memchr(rest.data(), delimiter, rest.size());
  if (!hit) reader.fail(what, "missing its terminating delimiter");
  const auto length = static_cast<std::size_t>(static_cast<const std::byte*>(hit) - rest.data());
  auto text = reader.string(length, what);
  reader.skip(1, what);
  return text;
}

std::uint64_t read_header_number(ByteReader& reader, char delimiter, std::string_view what) {
  const std::uint64_t at = reader.absolute_position();
  auto text = read_until(reader, delimiter, what);
  auto value = detail::parse_count(text);
  if (!value) {
    // Quoted up to the first NUL (which would end the message for C
    // readers), escaped to valid UTF-8: other formats' binary headers land here.
    const std::string_view shown = text.substr(0, std::min<std::size_t>(text.find('\0'), 32));
    throw Error(
        ErrorCode::corrupt,
        std::string(what) + ": '" + modelzip::detail::utf8_escape(shown) + "' is not a number",
        ErrorContext{.offset = at});
  }
  return *value;
}

// Refuses the first row's vector bytes when they are decimal text (a
// word2vec text file read as binary, e.g. text vectors named .bin), which
// would otherwise be read as garbage floats and words until some later
// error. Vectors of fewer than 8 bytes are not judged.
void refuse_text_vector(std::span<const std::byte> values, std::string_view word,
                        std::uint64_t at) {
  if (values.size() < 8) return;
  const std::string_view text(reinterpret_cast<const char*>(values.data()), values.size());
  if (text.find_first_not_of("0123456789.eE+- \t\r\n") != std::string_view::npos ||
      text.find_first_of("0123456789") == std::string_view::npos)
    return;
  throw Error(ErrorCode::corrupt,
              "word2vec row 0 ('" + modelzip::detail::utf8_escape(word.substr(0, 64)) +
                  "'): its vector is text ('" + std::string(text.substr(0, 24)) +
                  "...'), not binary floats: a word2vec text file? (read it as format "
                  "textdims: import --format textdims)",
              ErrorContext{.offset = at});
}

Embeddings read_word2vec_binary_bytes(const Bytes& data, const ConvertOptions& options) {
  ByteReader reader(data.span());
  const auto rows = read_header_number(reader, ' ', "word2vec header: rows");
  const auto dims = read_header_number(reader, '\n', "word2vec header: dims");
  // With 0 rows nothing below bounds dims, and lookups allocate dims floats.
  if (dims > reader.remaining())
    reader.fail("word2vec header",
                "declares " + std::to_string(dims) + " dims, more than the file's remaining bytes");
  // Every row needs at least its delimiter and dims floats.
  const std::uint64_t row_bytes = detail::checked_product(reader, dims, 4, "word2vec dims") + 1;
  if (rows > reader.remaining() / row_bytes)
    reader.fail("word2vec header", "declares " + std::to_string(rows) + " rows of " +
                                       std::to_string(dims) + " dims, the file has only " +
                                       std::to_string(reader.remaining()) + " bytes left");
  std::vector<std::string> words;
  words.reserve(static_cast<std::size_t>(rows));
  std::vector<std::uint64_t> word_offsets;  // where each (trimmed) word starts, for messages
  word_offsets.reserve(static_cast<std::size_t>(rows));
  std::vector<float> matrix(static_cast<std::size_t>(rows * dims));
  detail::WordDecoder decoder(options);
  for (std::uint64_t r = 0; r < rows; ++r) {
    const std::uint64_t at = reader.absolute_position();
    auto raw = read_until(reader, ' ', "word2vec word");
    auto word =
        decoder.decode(raw, "word2vec word " + std::to_string(r), ErrorContext{.offset = at});
    const std::string_view trimmed = detail::trim_unicode(word);
    // Decoding keeps the whitespace trimmed off the front byte for byte.
    word_offsets.push_back(at + static_cast<std::uint64_t>(trimmed.data() - word.data()));
    words.emplace_back(trimmed);
    const std::uint64_t values_at = reader.absolute_position();
    auto values = reader.bytes(dims * 4, "word2vec vector");
    if (r == 0) refuse_text_vector(values, words.back(), values_at);
    if (dims) std::memcpy(matrix.data() + r * dims, values.data(), dims * 4);
    if (!options.normalize) continue;
    std::size_t component = 0;
    if (const std::string problem = detail::unnormalizable(
            matrix.data() + r * dims, static_cast<std::size_t>(dims), &component);
        !problem.empty())
      throw Error(ErrorCode::corrupt,
                  "word2vec row " + std::to_string(r) + " ('" +
                      modelzip::detail::utf8_escape(words.back()) + "'): " + problem +
                      std::string(detail::kKeepRowHint),
                  ErrorContext{.offset = values_at + 4 * component});
  }
  return detail::simple_embeddings(
      std::move(words), std::move(matrix), static_cast<std::size_t>(dims), options, decoder,
      "word2vec", [&](std::size_t i) { return ErrorContext{.offset = word_offsets[i]}; });
}

}  // namespace

Embeddings read_word2vec_binary(const Bytes& data, const ConvertOptions& options,
                                std::string_view source) {
  return detail::read_from(source, [&] { return read_word2vec_binary_bytes(data, options); });
}

namespace detail {

// Where a word ends in a file of these formats: text fields are separated
// by ASCII whitespace; a word2vec word ends at a space and is read back
// trimmed of Unicode whitespace.
enum class WordEnd { ascii_space, word2vec };

// Refuses, before anything is written, a word the format's reader would not
// give back (finalfusion vocabularies hold any string: phrases, "").
void check_words(const Embeddings& e, WordEnd end) {
  const auto words = e.vocab().words();
  const bool escaped = words_escaped(e);
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string word = escaped ? original_word(e, words[i]) : words[i];
    const bool text = end == WordEnd::ascii_space;
    const bool lost = text ? word.empty() || std::any_of(word.begin(), word.end(), is_ascii_space)
                           : word.find(' ') != std::string::npos || trim_unicode(word) != word;
    if (lost)
      throw Error(ErrorCode::invalid_argument,
                  "word " + std::to_string(i) + " '" + modelzip::detail::utf8_escape(words[i]) +
                      "' cannot be written to " + (text ? "a text" : "a word2vec binary") +
                      " file: " +
                      (word.empty() ? "an empty word"
                       : text       ? "whitespace separates the fields there"
                                    : "a space ends a word and whitespace around it is "
                                      "trimmed there") +
                      " (a .fifu file holds any word)");
  }
}

// Calls fn(word, row pointer) for every word: the row as stored with
// `options.normalize`, else multiplied by its norm (WriteOptions).
template <class F>
void for_each_word_row(const Embeddings& e, const WriteOptions& options, F&& fn) {
  const std::size_t d = e.dims();
  std::vector<float> row(d);
  const auto words = e.vocab().words();
  const auto norms = e.norms();
  const bool escaped = words_escaped(e);
  for (std::size_t i = 0; i < words.size(); ++i) {
    e.row(i, row);
    if (!options.normalize && !norms.empty())
      for (auto& v : row) v *= norms[i];
    fn(escaped ? original_word(e, words[i]) : words[i], row.data());
  }
}

// Refuses, before anything is written, a value that is not finite among
// the rows that will be written: these formats' readers normalize the
// vectors they read (modelzip import refuses such a row; fastText's text
// reader cannot even parse "nan" or "inf").
void check_values(const Embeddings& e, const WriteOptions& options) {
  const std::size_t d = e.dims();
  const auto norms = e.norms();
  std::vector<float> stored(d);
  std::size_t i = 0;
  for_each_word_row(e, options, [&](const std::string&, const float* row) {
    for (std::size_t c = 0; c < d; ++c) {
      if (std::isfinite(row[c])) continue;
      std::string value;
      append_float(value, row[c]);
      std::string made;
      e.row(i, stored);
      if (!options.normalize && !norms.empty() && std::isfinite(stored[c])) {
        std::string v, n;
        append_float(v, stored[c]);
        append_float(n, norms[i]);
        made = " (the stored " + v + " times the row's norm " + n + ")";
      }
      throw Error(ErrorCode::invalid_argument,
                  "row " + std::to_string(i) + " ('" +
                      modelzip::detail::utf8_escape(e.vocab().words()[i]) + "'): component " +
                      std::to_string(c + 1) + made + " is " + value +
                      ", which word2vec and text files do not hold: their readers normalize "
                      "the vectors (import refuses such a row, fastText's reader cannot parse "
                      "it); a .fifu file holds any value");
    }
    ++i;
  });
}

void write_stream(std::ostream& out, const std::string& text) {
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) throw Error(ErrorCode::io, "cannot write embeddings to the output stream");
}

void write_rows_text(const Embeddings& e, std::ostream& out, const WriteOptions& options,
                     std::string_view header) {
  check_words(e, WordEnd::ascii_space);
  check_values(e, options);
  write_stream(out, std::string(header));
  std::string line;
  const std::size_t d = e.dims();
  for_each_word_row(e, options, [&](const std::string& word, const float* row) {
    line.clear();
    line += word;
    for (std::size_t i = 0; i < d; ++i) {
      line += ' ';
      append_float(line, row[i]);
    }
    line += '\n';
    write_stream(out, line);
  });
}

}  // namespace detail

void write_word2vec_binary(std::ostream& out, const Embeddings& embeddings,
                           const WriteOptions& options) {
  const std::size_t d = embeddings.dims();
  detail::check_words(embeddings, detail::WordEnd::word2vec);
  detail::check_values(embeddings, options);
  detail::write_stream(
      out, std::to_string(embeddings.vocab().words_len()) + " " + std::to_string(d) + "\n");
  std::string buffer;
  detail::for_each_word_row(embeddings, options, [&](const std::string& word, const float* row) {
    buffer.assign(word);
    buffer += ' ';
    buffer.append(reinterpret_cast<const char*>(row), d * sizeof(float));
    buffer += '\n';
    detail::write_stream(out, buffer);
  });
}

}  // namespace modelzip::finalfusion
