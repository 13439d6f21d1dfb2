#include "format/text_lines.hpp"

#include <string>

#include "core/utf8.hpp"
#include "modelzip/error.hpp"

namespace modelzip::format {

std::vector<TextLine> split_lines(std::string_view text, const Limits& limits) {
  if (text.size() > limits.max_text_entry_bytes)
    throw Error(ErrorCode::limit_exceeded, "text entry of " + std::to_string(text.size()) +
                                               " bytes exceeds the limit of " +
                                               std::to_string(limits.max_text_entry_bytes));
  std::vector<TextLine> lines;
  std::uint64_t number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    ++number;
    auto fail = [&](const std::string& what) {
      throw Error(ErrorCode::corrupt, what, ErrorContext{.line = number});
    };
    if (auto bad = detail::utf8_invalid_at(line))
      fail("invalid UTF-8 at column " + std::to_string(*bad + 1));
    if (line.find('\r') != std::string_view::npos)
      fail("carriage return in line (use \\n line ends)");
    if (line.find('\0') != std::string_view::npos) fail("NUL byte in line");
    lines.push_back({number, line});
    start = end + 1;
  }
  return lines;
}

}  // namespace modelzip::format
