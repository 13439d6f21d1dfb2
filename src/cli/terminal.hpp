// Colour on a terminal only: ANSI escape codes are written when the stream is
// a terminal, the environment variable NO_COLOR is unset or empty
// (https://no-color.org) and TERM is not "dumb". Pipes and files never get them.
#pragma once

#include <string>
#include <string_view>

namespace modelzip::cli {

enum class Colour { red, green, yellow, bold };

// Whether colour may be written to file descriptor `fd` (1 or 2).
bool colour_enabled(int fd);

// `text` wrapped in the escape codes of `colour` when `on`, else unchanged.
std::string paint(std::string_view text, Colour colour, bool on);

}  // namespace modelzip::cli
