#include "format/text_lines.hpp"

#include <string>

#include "core/utf8.hpp"
#include "modelzip/error.hpp"

namespace modelzip::format {

namespace {

// The line of `text` that starts at `start` (< text.size()): its text,
// where the line after it starts, and what is wrong with it (empty: nothing).
struct RawLine {
  std::string_view text;
  std::size_t next;
  std::string problem;
};

RawLine raw_line(std::string_view text, std::size_t start) {
  std::size_t end = text.find('\n', start);
  if (end == std::string_view::npos) end = text.size();
  RawLine out{text.substr(start, end - start), end + 1, {}};
  if (auto bad = detail::utf8_invalid_at(out.text))
    out.problem = "invalid UTF-8 at column " + std::to_string(*bad + 1);
  else if (out.text.find('\r') != std::string_view::npos)
    out.problem = "carriage return in line (use \\n line ends)";
  else if (out.text.find('\0') != std::string_view::npos)
    out.problem = "NUL byte in line";
  return out;
}

}  // namespace

LineRange::iterator::iterator(std::string_view text) : text_(text) {
  ++*this;
}

LineRange::iterator& LineRange::iterator::operator++() {
  if (next_ >= text_.size()) {
    done_ = true;
    return *this;
  }
  RawLine line = raw_line(text_, next_);
  const std::uint64_t number = line_.number + 1;
  if (!line.problem.empty())
    throw Error(ErrorCode::corrupt, std::move(line.problem), ErrorContext{.line = number});
  line_ = {number, line.text};
  next_ = line.next;
  return *this;
}

void for_each_line(std::string_view text, const Limits& limits,
                   const std::function<void(const TextLine&)>& on_line,
                   const std::function<void(const Error&)>& on_bad_line) {
  (void)lines_of(text, limits);  // the checks of the whole text
  std::uint64_t number = 0;
  for (std::size_t next = 0; next < text.size();) {
    RawLine line = raw_line(text, next);
    next = line.next;
    ++number;
    if (line.problem.empty())
      on_line(TextLine{number, line.text});
    else
      on_bad_line(Error(ErrorCode::corrupt, std::move(line.problem), ErrorContext{.line = number}));
  }
}

void check_no_byte_order_mark(std::string_view text) {
  if (text.starts_with("\xEF\xBB\xBF"))
    throw Error(ErrorCode::corrupt,
                "starts with a UTF-8 byte-order mark (EF BB BF), which the format does not allow",
                ErrorContext{.line = 1});
}

LineRange lines_of(std::string_view text, const Limits& limits) {
  if (text.size() > limits.max_text_entry_bytes)
    throw Error(ErrorCode::limit_exceeded, "text entry of " + std::to_string(text.size()) +
                                               " bytes exceeds the limit of " +
                                               std::to_string(limits.max_text_entry_bytes));
  check_no_byte_order_mark(text);
  return LineRange(text);
}

std::vector<TextLine> split_lines(std::string_view text, const Limits& limits) {
  std::vector<TextLine> lines;
  for (const auto& line : lines_of(text, limits)) lines.push_back(line);
  return lines;
}

}  // namespace modelzip::format
