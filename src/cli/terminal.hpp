// What reaches a terminal. Names and words come from untrusted files, so
// every human-readable line goes through printable(): escape sequences in a
// parameter name must not clear the screen or set the window title, and a
// newline in a name must not break "one line per item".
//
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

// `text` safe to show: C0 control characters, DEL, C1 control characters
// (U+0080..U+009F) and bytes that are not valid UTF-8 become visible escapes
// ("\n", "\t", "\r", "\x1b", "\u0085"; an invalid byte: "\xc3").
// With `keep_lines`, '\n' and '\t' pass unchanged (for multi-line text
// built by the CLI itself). Everything else, including valid non-ASCII
// UTF-8, is unchanged (detail::printable, which Error applies to its
// messages). Used for every human-readable output and error line; --json
// output instead keeps exact strings (JSON-escaped).
std::string printable(std::string_view text, bool keep_lines = false);

// `text` wrapped in the escape codes of `colour` when `on`, else unchanged.
std::string paint(std::string_view text, Colour colour, bool on);

}  // namespace modelzip::cli
