#include "finalfusion/convert/embedding_builder.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <unordered_map>

#include "core/fail.hpp"
#include "core/utf8.hpp"
#include "finalfusion/vector_math.hpp"
#include "finalfusion/vocab_impl.hpp"

namespace modelzip::finalfusion::detail {

bool WordDecoder::needs_decoding(std::string_view bytes) const noexcept {
  return options_.utf8 == Utf8Policy::escape ? modelzip::detail::utf8_needs_escape(bytes)
                                             : !modelzip::detail::utf8_valid(bytes);
}

std::string WordDecoder::decode(std::string_view bytes, std::string_view what,
                                const ErrorContext& context) {
  if (!needs_decoding(bytes)) return std::string(bytes);
  switch (options_.utf8) {
    case Utf8Policy::lossy:
      ++replaced_;
      return modelzip::detail::utf8_lossy(bytes);
    case Utf8Policy::escape:
      ++escaped_;
      return modelzip::detail::utf8_escape(bytes);
    case Utf8Policy::strict:
      break;
  }
  ErrorContext c = context;
  if (c.offset) *c.offset += *modelzip::detail::utf8_invalid_at(bytes);
  throw Error(ErrorCode::corrupt,
              std::string(what) +
                  " is not valid UTF-8 (the lossy UTF-8 policy replaces invalid bytes by "
                  "U+FFFD; the escape policy keeps them as \\xNN)",
              c);
}

void WordDecoder::finish(std::span<const std::string> words, std::string_view what,
                         const ErrorContext& context,
                         const std::function<ErrorContext(std::size_t)>& word_context) const {
  std::unordered_map<std::string_view, std::size_t> seen;
  seen.reserve(words.size());
  for (std::size_t i = 0; i < words.size(); ++i) {
    auto [it, fresh] = seen.emplace(words[i], i);
    if (fresh) continue;
    std::string message = std::string(what) + ": words " + std::to_string(it->second) + " and " +
                          std::to_string(i) + " are both '" + words[i].substr(0, 64) + "'";
    if (options_.utf8 == Utf8Policy::lossy && replaced_ > 0 &&
        words[i].find("\xEF\xBF\xBD") != std::string::npos)
      message +=
          " after lossy UTF-8 decoding (" + std::to_string(replaced_) +
          " word(s) had invalid bytes replaced by U+FFFD, so words that differ only in those "
          "bytes collide; the escape policy keeps them apart)";
    else
      message += " (a word may occur only once)";
    throw Error(ErrorCode::corrupt, message, word_context ? word_context(i) : context);
  }
  if (options_.report) {
    options_.report->words_replaced += replaced_;
    options_.report->words_escaped += escaped_;
  }
}

std::optional<EmbeddingsMetadata> WordDecoder::mark(
    std::optional<EmbeddingsMetadata> metadata) const {
  if (escaped_ == 0) return metadata;
  MetadataValue root = metadata ? metadata->root() : MetadataValue();
  const auto dot = kWordEscapeKey.find('.');
  MetadataValue table;
  if (const MetadataValue* existing = root.get(kWordEscapeKey.substr(0, dot));
      existing && existing->is_table())
    table = *existing;
  table.set(std::string(kWordEscapeKey.substr(dot + 1)),
            MetadataValue::string(std::string(kWordEscapeValue)));
  root.set(std::string(kWordEscapeKey.substr(0, dot)), std::move(table));
  return EmbeddingsMetadata::from_table(root);
}

namespace {

bool is_unicode_space(char32_t c) noexcept {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Decodes the code point starting at s[i] (valid UTF-8), returning its length.
std::size_t decode_at(std::string_view s, std::size_t i, char32_t& cp) noexcept {
  const auto c = static_cast<unsigned char>(s[i]);
  auto cont = [&](std::size_t k) { return static_cast<char32_t>(s[i + k] & 0x3F); };
  if (c < 0x80) {
    cp = c;
    return 1;
  }
  if (c < 0xE0 && i + 1 < s.size()) {
    cp = (static_cast<char32_t>(c & 0x1F) << 6) | cont(1);
    return 2;
  }
  if (c < 0xF0 && i + 2 < s.size()) {
    cp = (static_cast<char32_t>(c & 0x0F) << 12) | (cont(1) << 6) | cont(2);
    return 3;
  }
  if (i + 3 < s.size()) {
    cp = (static_cast<char32_t>(c & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
    return 4;
  }
  cp = 0xFFFD;
  return s.size() - i;
}

}  // namespace

std::string_view trim_unicode(std::string_view text) noexcept {
  std::size_t begin = 0;
  while (begin < text.size()) {
    char32_t cp;
    const std::size_t n = decode_at(text, begin, cp);
    if (!is_unicode_space(cp)) break;
    begin += n;
  }
  std::size_t end = text.size();
  while (end > begin) {
    std::size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    char32_t cp;
    decode_at(text, start, cp);
    if (!is_unicode_space(cp)) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

std::string_view trim_ascii(std::string_view text) noexcept {
  while (!text.empty() && is_ascii_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_ascii_space(text.back())) text.remove_suffix(1);
  return text;
}

std::string_view without_utf8_bom(std::string_view text) noexcept {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  return text;
}

std::optional<std::uint64_t> parse_count(std::string_view text) noexcept {
  text = trim_ascii(text);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<float> parse_float(std::string_view text) noexcept {
  if (text.size() > 1 && text.front() == '+' && text[1] != '-' && text[1] != '+')
    text.remove_prefix(1);
  float value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || end != text.data() + text.size()) return std::nullopt;
  if (ec == std::errc::result_out_of_range) {
    // Rust rounds to infinity or zero instead of failing.
    const double d = std::strtod(std::string(text).c_str(), nullptr);
    return static_cast<float>(d);
  }
  if (ec != std::errc()) return std::nullopt;
  // from_chars also accepts "nan(chars)", which Rust does not.
  if (std::isnan(value) && text.find('(') != std::string_view::npos) return std::nullopt;
  return value;
}

void append_float(std::string& out, float value) {
  if (std::isnan(value)) {
    out += "NaN";
    return;
  }
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed);
  if (ec != std::errc()) throw Error(ErrorCode::invalid_argument, "cannot format a float");
  out.append(buffer, end);
}

std::string unnormalizable(const float* row, std::size_t dims, std::size_t* component) {
  for (std::size_t i = 0; i < dims; ++i)
    if (!std::isfinite(row[i])) {
      if (component) *component = i;
      std::string shown;
      append_float(shown, row[i]);
      return "component " + std::to_string(i + 1) + " is " + shown +
             ", and a row with it has no norm to normalize by";
    }
  double sum = 0;
  for (std::size_t i = 0; i < dims; ++i) sum += static_cast<double>(row[i]) * row[i];
  const double norm = std::sqrt(sum);
  if (norm > std::numeric_limits<float>::max()) {
    char shown[32];
    std::snprintf(shown, sizeof shown, "%.3g", norm);
    return std::string("its norm ") + shown + " is beyond float32's range";
  }
  return "";
}

std::vector<float> normalize_rows(std::vector<float>& matrix, std::size_t rows, std::size_t dims,
                                  std::span<const std::string> words) {
  std::vector<float> norms(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    float* row = matrix.data() + r * dims;
    // Only rows whose float sum of squares is not a normal number need the
    // check (a non-finite component makes it infinite or NaN).
    if (!std::isnormal(dot(row, row, dims)))
      if (const std::string problem = unnormalizable(row, dims); !problem.empty())
        modelzip::detail::fail_corrupt(
            "row " + std::to_string(r) +
            (r < words.size() ? " ('" + modelzip::detail::utf8_escape(words[r]) + "')" : "") +
            ": " + problem + std::string(detail::kKeepRowHint));
    norms[r] = static_cast<float>(l2_normalize_any(row, dims));
  }
  return norms;
}

Embeddings simple_embeddings(std::vector<std::string> words, std::vector<float> matrix,
                             std::size_t dims, const ConvertOptions& options,
                             const WordDecoder& decoder, std::string_view what,
                             const std::function<ErrorContext(std::size_t)>& word_context) {
  decoder.finish(words, what, {}, word_context);
  std::optional<std::vector<float>> norms;
  if (options.normalize) norms = normalize_rows(matrix, words.size(), dims, words);
  Vocab vocab =
      Vocab::Access::make(make_simple_vocab(std::move(words), Failure{ErrorCode::corrupt, {}}));
  try {
    return Embeddings::from_matrix(std::move(vocab), std::move(matrix), dims, std::move(norms),
                                   decoder.mark(std::nullopt));
  } catch (const Error& e) {
    throw Error(ErrorCode::corrupt, std::string(what) + ": " + e.message(), e.context());
  }
}

}  // namespace modelzip::finalfusion::detail
