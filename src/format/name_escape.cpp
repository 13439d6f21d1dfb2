#include "format/name_escape.hpp"

#include <algorithm>

#include "core/utf8.hpp"
#include "modelzip/error.hpp"

namespace modelzip::format {
namespace {

bool needs_escape(unsigned char c) noexcept {
  return c <= 0x20 || c == 0x7F || c == '%' || c == '#';
}

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string escape_name(std::string_view name) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  out.reserve(name.size());
  // A name starting with U+FEFF has those three bytes (EF BB BF) escaped:
  // the first name of a table starts the file, which must not start with a
  // byte-order mark, and a line must stay valid UTF-8 (FORMAT.md 4.2).
  const std::size_t bom_bytes = name.starts_with("\xEF\xBB\xBF") ? 3 : 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char ch = name[i];
    auto c = static_cast<unsigned char>(ch);
    if (needs_escape(c) || i < bom_bytes) {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;
    }
  }
  return out;
}

std::string unescape_name(std::string_view field) {
  // Common case: printable ASCII without escapes is its own name (and valid
  // UTF-8); anything else takes the full path below.
  if (!field.empty() && std::all_of(field.begin(), field.end(), [](char ch) {
        auto c = static_cast<unsigned char>(ch);
        return c < 0x80 && !needs_escape(c);
      }))
    return std::string(field);
  auto fail = [](const std::string& what) { throw Error(ErrorCode::corrupt, what); };
  std::string out;
  out.reserve(field.size());
  for (std::size_t i = 0; i < field.size(); ++i) {
    auto c = static_cast<unsigned char>(field[i]);
    if (c == '%') {
      int hi = i + 1 < field.size() ? hex_value(field[i + 1]) : -1;
      int lo = i + 2 < field.size() ? hex_value(field[i + 2]) : -1;
      if (hi < 0 || lo < 0)
        fail("malformed escape '" + std::string(field.substr(i, 3)) + "' at column " +
             std::to_string(i + 1) + " (expected % and two hex digits)");
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (needs_escape(c)) {
      fail("unescaped byte " + std::to_string(c) + " at column " + std::to_string(i + 1));
    } else {
      out += static_cast<char>(c);
    }
  }
  if (out.empty()) fail("empty name");
  if (auto bad = detail::utf8_invalid_at(out))
    fail("name is not valid UTF-8 after unescaping (byte " + std::to_string(*bad) + ")");
  return out;
}

}  // namespace modelzip::format
