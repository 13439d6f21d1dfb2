// Splitting of the UTF-8 text entries (tags.txt, params.txt, updater.txt)
// into lines, with the rules every text entry shares: valid UTF-8, lines end
// with "\n" (the last one may omit it), no "\r", no NUL. Errors carry the line.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "modelzip/limits.hpp"

namespace modelzip::format {

struct TextLine {
  std::uint64_t number;  // 1-based
  std::string_view text;
};

// The lines of `text`, without line ends. Throws Error(corrupt) with the line
// number for invalid UTF-8, '\r' or NUL; Error(limit_exceeded) past the size
// limit.
std::vector<TextLine> split_lines(std::string_view text, const Limits& limits);

}  // namespace modelzip::format
