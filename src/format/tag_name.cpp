#include "format/tag_name.hpp"

#include <array>

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

std::string invalid_tag_reason(std::string_view tag) {
  if (tag.empty()) return "a tag must not be empty";
  if (tag.size() > kMaxTagLength)
    return "a tag is at most " + std::to_string(kMaxTagLength) + " characters";
  for (std::size_t i = 0; i < tag.size(); ++i) {
    auto c = static_cast<unsigned char>(tag[i]);
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '+' || c == '=' || c == '@' || c == '-';
    if (!ok) {
      std::string shown = c >= 0x20 && c < 0x7F ? std::string("'") + static_cast<char>(c) + "'"
                                                : "byte " + std::to_string(c);
      return "tag contains " + shown + " at position " + std::to_string(i) +
             " (allowed: ASCII letters, digits and . _ + = @ -)";
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
