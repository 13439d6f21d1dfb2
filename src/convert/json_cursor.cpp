#include "convert/json_cursor.hpp"

#include "core/utf8.hpp"
#include "modelzip/error.hpp"

namespace modelzip::convert::detail {

JsonCursor::JsonCursor(std::string_view text, std::uint64_t base_offset, std::string_view what)
    : text_(text), base_(base_offset), what_(what) {
  if (auto bad = modelzip::detail::utf8_invalid_at(text)) fail_at(base_ + *bad, "invalid UTF-8");
}

void JsonCursor::fail_at(std::uint64_t absolute_offset, const std::string& problem) const {
  throw Error(ErrorCode::corrupt, what_ + ": " + problem, ErrorContext{.offset = absolute_offset});
}

void JsonCursor::fail(const std::string& problem) {
  fail_at(base_ + pos_, problem);
}

void JsonCursor::skip_space() {
  while (pos_ < text_.size() &&
         (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
    ++pos_;
}

std::uint64_t JsonCursor::offset() {
  skip_space();
  return base_ + pos_;
}

void JsonCursor::expect(char c) {
  skip_space();
  if (peek() != c) {
    if (pos_ >= text_.size()) fail(std::string("expected '") + c + "', found the end");
    fail(std::string("expected '") + c + "'");
  }
  ++pos_;
}

void JsonCursor::begin_object() {
  expect('{');
  first_.push_back(true);
}

void JsonCursor::begin_array() {
  expect('[');
  first_.push_back(true);
}

bool JsonCursor::next_key(std::string& key) {
  skip_space();
  if (first_.empty()) fail("not inside an object");
  if (peek() == '}') {
    ++pos_;
    first_.pop_back();
    return false;
  }
  if (!first_.back()) expect(',');
  first_.back() = false;
  skip_space();
  if (peek() != '"') fail("expected a string key");
  key = read_string();
  expect(':');
  return true;
}

bool JsonCursor::next_item() {
  skip_space();
  if (first_.empty()) fail("not inside an array");
  if (peek() == ']') {
    ++pos_;
    first_.pop_back();
    return false;
  }
  if (!first_.back()) expect(',');
  first_.back() = false;
  skip_space();
  if (peek() == ']') fail("trailing comma");
  return true;
}

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string JsonCursor::read_string() {
  skip_space();
  if (peek() != '"') fail("expected a string");
  ++pos_;
  std::string out;
  auto read_hex4 = [&]() -> std::uint32_t {
    if (text_.size() - pos_ < 4) fail("truncated \\u escape");
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const int h = hex_value(text_[pos_ + i]);
      if (h < 0) fail("bad hex digit in \\u escape");
      v = v * 16 + static_cast<std::uint32_t>(h);
    }
    pos_ += 4;
    return v;
  };
  for (;;) {
    if (pos_ >= text_.size()) fail("unterminated string");
    const char c = text_[pos_];
    if (c == '"') {
      ++pos_;
      return out;
    }
    if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
    if (c != '\\') {
      out += c;
      ++pos_;
      continue;
    }
    const std::uint64_t escape_at = base_ + pos_;
    ++pos_;
    if (pos_ >= text_.size()) fail("unterminated escape");
    const char e = text_[pos_++];
    switch (e) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '/':
        out += '/';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        std::uint32_t cp = read_hex4();
        if (cp >= 0xDC00 && cp <= 0xDFFF)
          fail_at(escape_at, "unpaired low surrogate in \\u escape");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (text_.substr(pos_, 2) != "\\u")
            fail_at(escape_at, "unpaired high surrogate in \\u escape");
          pos_ += 2;
          const std::uint32_t low = read_hex4();
          if (low < 0xDC00 || low > 0xDFFF)
            fail_at(escape_at, "unpaired high surrogate in \\u escape");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        modelzip::detail::utf8_append(out, static_cast<char32_t>(cp));
        break;
      }
      default:
        fail_at(escape_at, std::string("invalid escape '\\") + e + "'");
    }
  }
}

std::uint64_t JsonCursor::read_uint() {
  skip_space();
  const std::size_t start = pos_;
  if (peek() == '-') fail("expected a non-negative integer, found a negative number");
  if (peek() < '0' || peek() > '9') fail("expected a non-negative integer");
  std::uint64_t v = 0;
  while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
    const auto digit = static_cast<std::uint64_t>(text_[pos_] - '0');
    if (pos_ > start && text_[start] == '0') fail_at(base_ + start, "number with a leading zero");
    if (v > (UINT64_MAX - digit) / 10) fail_at(base_ + start, "integer does not fit 64 bits");
    v = v * 10 + digit;
    ++pos_;
  }
  const char c = peek();
  if (c == '.' || c == 'e' || c == 'E')
    fail_at(base_ + start, "expected an integer, found a fraction or exponent");
  return v;
}

void JsonCursor::finish() {
  skip_space();
  if (!first_.empty()) fail("unterminated object or array");
  if (pos_ != text_.size()) fail("unexpected text after the JSON document");
}

}  // namespace modelzip::convert::detail
