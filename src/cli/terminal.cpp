#include "cli/terminal.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "core/printable.hpp"

namespace modelzip::cli {

bool colour_enabled(int fd) {
  const char* no_colour = std::getenv("NO_COLOR");
  if (no_colour != nullptr && no_colour[0] != '\0') return false;
  const char* term = std::getenv("TERM");
  if (term != nullptr && std::strcmp(term, "dumb") == 0) return false;
  return ::isatty(fd) == 1;
}

std::string printable(std::string_view text) {
  return detail::printable_name(text);
}

std::string quoted_name(std::string_view text) {
  return detail::quote_name(text);
}

std::string printable_message(std::string_view text, bool keep_lines) {
  return detail::printable(text, keep_lines);
}

std::string paint(std::string_view text, Colour colour, bool on) {
  if (!on) return std::string(text);
  const char* code = "";
  switch (colour) {
    case Colour::red:
      code = "\033[31m";
      break;
    case Colour::green:
      code = "\033[32m";
      break;
    case Colour::yellow:
      code = "\033[33m";
      break;
    case Colour::bold:
      code = "\033[1m";
      break;
  }
  return code + std::string(text) + "\033[0m";
}

}  // namespace modelzip::cli
