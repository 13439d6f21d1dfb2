// A strict pull parser for JSON (RFC 8259) documents of a known schema, used
// for the safetensors header. It builds no tree: the caller walks the
// document (objects, arrays, strings, unsigned integers), so memory stays
// proportional to what the caller keeps.
//
// Strictness: the text must be valid UTF-8; no comments, no trailing commas,
// no leading zeros, no control characters in strings, escapes as RFC 8259
// (\uXXXX surrogates must pair); only whitespace (space, tab, CR, LF) after
// the document. Errors: Error(corrupt, "<what>: ...") with the absolute byte
// offset (base_offset + position).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/json_text.hpp"

namespace modelzip::convert::detail {

class JsonCursor {
 public:
  // `what` names the document in messages ("safetensors header").
  JsonCursor(std::string_view text, std::uint64_t base_offset, std::string_view what);

  // Absolute offset of the next non-whitespace byte.
  std::uint64_t offset();

  // '{' / '['.
  void begin_object();
  void begin_array();
  // Inside an object: false (and consumes '}') at its end; otherwise reads
  // the next key and the ':' after it.
  bool next_key(std::string& key);
  // Inside an array: false (and consumes ']') at its end; otherwise true
  // with the cursor on the next item.
  bool next_item();

  std::string read_string();
  // A non-negative integer without fraction or exponent that fits 64 bits.
  std::uint64_t read_uint();

  // Checks that only whitespace follows the document.
  void finish();

  [[noreturn]] void fail(const std::string& problem);
  [[noreturn]] void fail_at(std::uint64_t absolute_offset, const std::string& problem) const;

 private:
  void skip_space();
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void expect(char c);
  // Containers opened and not closed: one flag each, true until the first
  // item or key has been read.
  std::vector<bool> first_;
  std::string_view text_;
  std::uint64_t base_;
  std::string what_;
  std::size_t pos_ = 0;
};

// Writing JSON (as serde_json does): core/json_text.hpp.
using modelzip::detail::append_json_string;

}  // namespace modelzip::convert::detail
