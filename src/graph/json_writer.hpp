// JsonWriter: builds indented JSON text (RFC 8259) for the graph, training
// config and tag summary renderers. Strings and numbers are written by the
// one JSON text module (core/json_text.hpp; valid UTF-8 passes through). Numbers are written in the
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

#include "core/json_text.hpp"

namespace modelzip::graph::detail {

inline std::string json_quote(std::string_view s) {
  return modelzip::detail::json_string(s);
}

// Shortest "%.*g" text that reads back to `v` (finite `v` only).
inline std::string shortest_double(double v) {
  return modelzip::detail::json_double(v);
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
