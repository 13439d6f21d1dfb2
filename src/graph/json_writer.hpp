// JsonWriter: builds indented JSON text (RFC 8259) for the graph, training
// config and tag summary renderers. Strings are escaped (control characters
// as \uXXXX; valid UTF-8 passes through). Numbers are written in the
// shortest form that reads back to the same double; non-finite doubles
// become the strings "NaN", "Infinity", "-Infinity" (JSON has no such
// numbers). Internal to modelzip; not thread-safe (one writer per thread).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace modelzip::graph::detail {

inline std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

// Shortest "%.*g" text that reads back to `v` (finite `v` only).
inline std::string shortest_double(double v) {
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

class JsonWriter {
 public:
  // An object or array; `inline_items` writes its items on one line.
  JsonWriter& begin_object(bool inline_items = false) { return open('{', inline_items); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array(bool inline_items = false) { return open('[', inline_items); }
  JsonWriter& end_array() { return close(']'); }

  // The key of the next value inside an object.
  JsonWriter& key(std::string_view k) {
    item();
    out_ += json_quote(k) + ": ";
    after_key_ = true;
    return *this;
  }

  JsonWriter& value(std::string_view s) { return raw(json_quote(s)); }
  JsonWriter& value(const char* s) { return raw(json_quote(s)); }
  JsonWriter& value(const std::string& s) { return raw(json_quote(s)); }
  JsonWriter& value(bool b) { return raw(b ? "true" : "false"); }
  JsonWriter& value(std::int64_t v) { return raw(std::to_string(v)); }
  JsonWriter& value(std::uint64_t v) { return raw(std::to_string(v)); }
  JsonWriter& value(int v) { return raw(std::to_string(v)); }
  JsonWriter& value(unsigned v) { return raw(std::to_string(v)); }
  JsonWriter& value(double v) {
    if (std::isnan(v)) return raw("\"NaN\"");
    if (std::isinf(v)) return raw(v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    return raw(shortest_double(v));
  }
  JsonWriter& null() { return raw("null"); }

  // Already formatted JSON (e.g. a nested document).
  JsonWriter& raw(std::string_view text) {
    item();
    out_ += text;
    return *this;
  }

  std::string take() {
    out_ += "\n";
    return std::move(out_);
  }

 private:
  struct Level {
    bool inline_items;
    bool empty = true;
  };

  // Separator and indentation before an item (a value not after a key, or a
  // key).
  void item() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (levels_.empty()) return;
    Level& l = levels_.back();
    if (!l.empty) out_ += ",";
    if (l.inline_items)
      out_ += l.empty ? "" : " ";
    else
      newline(levels_.size());
    l.empty = false;
  }
  JsonWriter& open(char c, bool inline_items) {
    item();
    out_ += c;
    // Items inside an inline container are inline too.
    bool in_inline = !levels_.empty() && levels_.back().inline_items;
    levels_.push_back(Level{inline_items || in_inline});
    return *this;
  }
  JsonWriter& close(char c) {
    Level l = levels_.back();
    levels_.pop_back();
    if (!l.inline_items && !l.empty) newline(levels_.size());
    out_ += c;
    return *this;
  }
  void newline(std::size_t depth) {
    out_ += "\n";
    out_.append(depth * 2, ' ');
  }

  std::string out_;
  std::vector<Level> levels_;
  bool after_key_ = false;
};

}  // namespace modelzip::graph::detail
