// tags.txt: one tag per line, oldest first, unique without regard to case.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "modelzip/limits.hpp"

namespace modelzip::format {

// Throws Error(corrupt) with the line number for an invalid or duplicate tag
// or an empty line.
std::vector<std::string> parse_tags_file(std::string_view text, const Limits& limits);
std::string write_tags_file(const std::vector<std::string>& tags);

}  // namespace modelzip::format
