#include "format/tags_file.hpp"
#include "core/printable.hpp"

#include <unordered_map>

#include "format/tag_name.hpp"
#include "format/text_lines.hpp"
#include "modelzip/error.hpp"

namespace modelzip::format {

std::vector<std::string> parse_tags_file(std::string_view text, const Limits& limits) {
  std::vector<std::string> tags;
  std::unordered_map<std::string, std::uint64_t> seen;  // lower-case tag -> line
  for (const auto& line : lines_of(text, limits)) {
    auto fail = [&](const std::string& what) {
      throw Error(ErrorCode::corrupt, what, ErrorContext{.line = line.number});
    };
    if (auto why = invalid_tag_reason(line.text); !why.empty()) fail(why);
    auto [it, inserted] = seen.emplace(ascii_lower(line.text), line.number);
    if (!inserted)
      fail("tag " + modelzip::detail::quote_name(line.text) + " repeats the tag of line " +
           std::to_string(it->second) + " (tags are compared without regard to case)");
    tags.emplace_back(line.text);
  }
  return tags;
}

std::string write_tags_file(const std::vector<std::string>& tags) {
  std::string out;
  for (const auto& t : tags) out += t + "\n";
  return out;
}

}  // namespace modelzip::format
