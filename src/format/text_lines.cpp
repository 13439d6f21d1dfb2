#include "format/text_lines.hpp"

#include <string>

#include "core/utf8.hpp"
#include "modelzip/error.hpp"

namespace modelzip::format {

LineRange::iterator::iterator(std::string_view text) : text_(text) {
  ++*this;
}

LineRange::iterator& LineRange::iterator::operator++() {
  if (next_ >= text_.size()) {
    done_ = true;
    return *this;
  }
  std::size_t end = text_.find('\n', next_);
  if (end == std::string_view::npos) end = text_.size();
  const std::string_view line = text_.substr(next_, end - next_);
  const std::uint64_t number = line_.number + 1;
  auto fail = [&](const std::string& what) {
    throw Error(ErrorCode::corrupt, what, ErrorContext{.line = number});
  };
  if (auto bad = detail::utf8_invalid_at(line))
    fail("invalid UTF-8 at column " + std::to_string(*bad + 1));
  if (line.find('\r') != std::string_view::npos)
    fail("carriage return in line (use \\n line ends)");
  if (line.find('\0') != std::string_view::npos) fail("NUL byte in line");
  line_ = {number, line};
  next_ = end + 1;
  return *this;
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
