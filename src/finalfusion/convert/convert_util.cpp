#include "finalfusion/convert/convert_util.hpp"

#include <charconv>
#include <cmath>

#include "core/utf8.hpp"
#include "finalfusion/vector_math.hpp"
#include "finalfusion/vocab_impl.hpp"

namespace modelzip::finalfusion::detail {

std::string decode_token(std::string_view bytes, Utf8Policy policy, std::string_view what,
                         const ErrorContext& context) {
  auto bad = modelzip::detail::utf8_invalid_at(bytes);
  if (!bad) return std::string(bytes);
  if (policy == Utf8Policy::lossy) return modelzip::detail::utf8_lossy(bytes);
  ErrorContext c = context;
  if (c.offset) *c.offset += *bad;
  throw Error(ErrorCode::corrupt,
              std::string(what) +
                  " is not valid UTF-8 (use the lossy UTF-8 policy to replace "
                  "invalid bytes)",
              c);
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

std::vector<float> normalize_rows(std::vector<float>& matrix, std::size_t rows, std::size_t dims) {
  std::vector<float> norms(rows);
  for (std::size_t r = 0; r < rows; ++r) norms[r] = l2_normalize(matrix.data() + r * dims, dims);
  return norms;
}

Embeddings simple_embeddings(std::vector<std::string> words, std::vector<float> matrix,
                             std::size_t dims, bool normalize, std::string_view what) {
  Vocab vocab(make_simple_vocab(std::move(words), Failure{ErrorCode::corrupt, {}}));
  std::optional<std::vector<float>> norms;
  if (normalize) norms = normalize_rows(matrix, vocab.words_len(), dims);
  try {
    return Embeddings::from_matrix(std::move(vocab), std::move(matrix), dims, std::move(norms));
  } catch (const Error& e) {
    throw Error(ErrorCode::corrupt, std::string(what) + ": " + e.message(), e.context());
  }
}

}  // namespace modelzip::finalfusion::detail
