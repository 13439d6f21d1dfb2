#include "core/printable.hpp"

#include <cstdio>

#include "core/utf8.hpp"

namespace modelzip::detail {
namespace {

void append_escape(std::string& out, const char* format, unsigned value) {
  char buf[8];
  std::snprintf(buf, sizeof buf, format, value);
  out += buf;
}

// Appends valid UTF-8 `text` with its control characters escaped.
void append_valid(std::string& out, std::string_view text, bool keep_lines) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) < 0xA0) {
      append_escape(out, "\\u%04x", static_cast<unsigned char>(text[i + 1]));  // C1
      ++i;
    } else if (c >= 0x20 && c != 0x7F) {
      out += text[i];
    } else if (keep_lines && (c == '\n' || c == '\t')) {
      out += text[i];
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      append_escape(out, "\\x%02x", c);
    }
  }
}

}  // namespace

std::string printable(std::string_view text, bool keep_lines) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    auto bad = utf8_invalid_at(text);
    append_valid(out, text.substr(0, bad.value_or(text.size())), keep_lines);
    if (!bad) break;
    append_escape(out, "\\x%02x", static_cast<unsigned char>(text[*bad]));
    text.remove_prefix(*bad + 1);
  }
  return out;
}

std::string printable_name(std::string_view text) {
  // A backslash (0x5C) is never part of a multi-byte UTF-8 sequence, so
  // doubling it first changes no byte's validity, and printable() keeps it.
  std::string doubled;
  doubled.reserve(text.size());
  for (char c : text) {
    if (c == '\\') doubled += '\\';
    doubled += c;
  }
  return printable(doubled);
}

std::string quote_name(std::string_view name) {
  return "'" + printable_name(name) + "'";
}

}  // namespace modelzip::detail
