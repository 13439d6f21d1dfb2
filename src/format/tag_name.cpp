#include "format/tag_name.hpp"

#include <array>
#include <cstdio>

#include "core/utf8.hpp"

#include "modelzip/error.hpp"

namespace modelzip::format {

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

bool same_tag(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

namespace {

// The character `text` starts with, for a message: "'/'", "'é' (U+00E9)", "U+001B"
// for a control character (never written raw), "byte 0xC3" when `text` does
// not start with a valid UTF-8 sequence.
std::string character_name(std::string_view text) {
  auto c = static_cast<unsigned char>(text[0]);
  std::size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
  char buf[32];
  if (len > text.size() || detail::utf8_invalid_at(text.substr(0, len))) {
    std::snprintf(buf, sizeof buf, "byte 0x%02X", c);
    return buf;
  }
  char32_t cp = detail::utf8_decode(text.substr(0, len))[0];
  std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(cp));
  if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0)) return buf;
  if (cp < 0x7F) return "'" + std::string(1, static_cast<char>(cp)) + "'";
  return "'" + std::string(text.substr(0, len)) + "' (" + buf + ")";
}

}  // namespace

std::string invalid_tag_reason(std::string_view tag) {
  if (tag.empty()) return "a tag must not be empty";
  if (tag.size() > kMaxTagLength)
    return "a tag is at most " + std::to_string(kMaxTagLength) + " characters";
  for (std::size_t i = 0; i < tag.size(); ++i) {
    auto c = static_cast<unsigned char>(tag[i]);
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '+' || c == '=' || c == '@' || c == '-';
    if (c == '/')
      return "'/' at position " + std::to_string(i) +
             " is not allowed in a tag: a tag is one folder of the archive, and '/' separates "
             "that folder from its files in entry names and a tag from the blob in a reference "
             "like <tag>/<n> (write run1/step-5 as run1.step-5 or run1_step-5)";
    if (!ok) {
      return character_name(tag.substr(i)) + " at position " + std::to_string(i) +
             " is not allowed in a tag (allowed: ASCII letters, digits and . _ + = @ -)";
    }
  }
  if (tag.front() == '.' || tag.back() == '.') return "a tag must not start or end with '.'";
  static const std::array<std::string_view, 22> reserved = {
      "con",  "prn",  "aux",  "nul",  "com1", "com2", "com3", "com4", "com5", "com6", "com7",
      "com8", "com9", "lpt1", "lpt2", "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9"};
  std::string lower = ascii_lower(tag);
  std::string stem = lower.substr(0, lower.find('.'));
  for (auto r : reserved)
    if (stem == r) return "'" + std::string(tag) + "' is a reserved device name on Windows";
  return {};
}

void check_tag(std::string_view tag) {
  if (auto why = invalid_tag_reason(tag); !why.empty())
    throw Error(ErrorCode::invalid_argument, why, ErrorContext{.tag = std::string(tag)});
}

}  // namespace modelzip::format
