// Splitting of the UTF-8 text entries (tags.txt, params.txt, updater.txt)
// into lines, with the rules every text entry shares: valid UTF-8, lines end
// with "\n" (the last one may omit it), no "\r", no NUL, no byte-order mark.
// Errors carry the line.
#pragma once

#include <cstdint>
#include <functional>
#include <iterator>
#include <string_view>
#include <vector>

#include "modelzip/error.hpp"
#include "modelzip/limits.hpp"

namespace modelzip::format {

struct TextLine {
  std::uint64_t number;  // 1-based
  std::string_view text;
};

// The lines of a text, produced one at a time as a loop advances: memory
// does not grow with the number of lines, and a parser that rejects line 1
// never looks at the rest (a text of a billion empty lines costs nothing).
// Each line is checked when the iterator reaches it: Error(corrupt) with the
// line number for invalid UTF-8, '\r' or NUL. Views into the text, which
// must outlive the range.
// Throws Error(corrupt) at line 1 if `text` starts with a UTF-8 byte-order
// mark (EF BB BF): no text entry of the format may have one (FORMAT.md
// section 4; modelzip.toml too), so that it never becomes part of a name.
void check_no_byte_order_mark(std::string_view text);

class LineRange {
 public:
  class iterator {
   public:
    using value_type = TextLine;
    using difference_type = std::ptrdiff_t;
    const TextLine& operator*() const noexcept { return line_; }
    const TextLine* operator->() const noexcept { return &line_; }
    iterator& operator++();
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const noexcept { return done_; }

   private:
    friend class LineRange;
    explicit iterator(std::string_view text);
    std::string_view text_;
    std::size_t next_ = 0;  // where the line after line_ starts
    TextLine line_{0, {}};
    bool done_ = false;
  };

  iterator begin() const { return iterator(text_); }
  std::default_sentinel_t end() const noexcept { return {}; }

 private:
  friend LineRange lines_of(std::string_view text, const Limits& limits);
  explicit LineRange(std::string_view text) : text_(text) {}
  std::string_view text_;
};

// The lines of `text`, lazily. Throws Error(limit_exceeded) at once when the
// text exceeds Limits::max_text_entry_bytes.
LineRange lines_of(std::string_view text, const Limits& limits);

// The lines of `text`, each passed to `on_line`, for a reader that reports
// every bad line: a line that lines_of would throw for (invalid UTF-8, '\r',
// NUL) is passed to `on_bad_line` as that Error instead, and the lines after
// it follow. What concerns the whole text (size, byte-order mark) is thrown
// as lines_of throws it. Either function may throw, which ends the loop.
void for_each_line(std::string_view text, const Limits& limits,
                   const std::function<void(const TextLine&)>& on_line,
                   const std::function<void(const Error&)>& on_bad_line);

// All lines of `text` at once, without line ends (for small texts and
// tests; parsers iterate lines_of). Errors as lines_of.
std::vector<TextLine> split_lines(std::string_view text, const Limits& limits);

}  // namespace modelzip::format
