#include "core/utf8.hpp"

namespace modelzip::detail {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if invalid.
std::size_t valid_sequence_length(std::string_view s, std::size_t i) noexcept {
  auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const std::size_t left = s.size() - i;
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  auto cont = [&](std::size_t k) { return k < left && (b(k) & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (left < 2) return 0;
    unsigned char c1 = b(1);
    if (c == 0xE0 && c1 < 0xA0) return 0;  // overlong
    if (c == 0xED && c1 > 0x9F) return 0;  // surrogates
    return cont(1) && cont(2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (left < 2) return 0;
    unsigned char c1 = b(1);
    if (c == 0xF0 && c1 < 0x90) return 0;  // overlong
    if (c == 0xF4 && c1 > 0x8F) return 0;  // above U+10FFFF
    return cont(1) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

// Length of the maximal prefix of an invalid sequence at s[i] (at least 1),
// following the W3C/WHATWG "maximal subpart" rule used by Rust and Python.
std::size_t invalid_prefix_length(std::string_view s, std::size_t i) noexcept {
  auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const std::size_t left = s.size() - i;
  const unsigned char c = b(0);
  std::size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF)
    need = 1;
  else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else
    return 1;
  std::size_t k = 1;
  for (; k <= need && k < left; ++k) {
    unsigned char x = b(k);
    if (k == 1 ? (x < lo || x > hi) : (x & 0xC0) != 0x80) break;
  }
  return k;
}

}  // namespace

std::optional<std::size_t> utf8_invalid_at(std::string_view text) noexcept {
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t n = valid_sequence_length(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

std::string utf8_lossy(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t n = valid_sequence_length(text, i);
    if (n) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += invalid_prefix_length(text, i);
    }
  }
  return out;
}

std::vector<char32_t> utf8_decode(std::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    auto cont = [&](std::size_t k) { return static_cast<char32_t>(text[i + k] & 0x3F); };
    if (c < 0x80) {
      out.push_back(c);
      i += 1;
    } else if (c < 0xE0) {
      out.push_back((static_cast<char32_t>(c & 0x1F) << 6) | cont(1));
      i += 2;
    } else if (c < 0xF0) {
      out.push_back((static_cast<char32_t>(c & 0x0F) << 12) | (cont(1) << 6) | cont(2));
      i += 3;
    } else {
      out.push_back((static_cast<char32_t>(c & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) |
                    cont(3));
      i += 4;
    }
  }
  return out;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string utf8_escape(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() + 8);
  std::size_t i = 0;
  while (i < bytes.size()) {
    if (bytes[i] == '\\') {
      out += "\\\\";
      ++i;
      continue;
    }
    if (const std::size_t n = valid_sequence_length(bytes, i)) {
      out.append(bytes.substr(i, n));
      i += n;
      continue;
    }
    const auto b = static_cast<unsigned char>(bytes[i++]);
    out += "\\x";
    out += kHex[b >> 4];
    out += kHex[b & 0xF];
  }
  return out;
}

bool utf8_needs_escape(std::string_view bytes) noexcept {
  return bytes.find('\\') != std::string_view::npos || !utf8_valid(bytes);
}

std::optional<std::string> utf8_unescape(std::string_view text) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      out += text[i];
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '\\') {
      out += '\\';
      ++i;
      continue;
    }
    if (i + 3 >= text.size() || text[i + 1] != 'x') return std::nullopt;
    const int hi = hex(text[i + 2]), lo = hex(text[i + 3]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 3;
  }
  return out;
}

}  // namespace modelzip::detail
