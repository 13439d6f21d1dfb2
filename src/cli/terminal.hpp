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

// `text` -- a name, word, tag, value or path, as the file or the user gave
// it -- safe to show and unambiguous (detail::printable_name): a backslash
// shows doubled ("\\"), then C0 control characters, DEL, C1 control
// characters (U+0080..U+009F) and bytes that are not valid UTF-8 become
// visible escapes ("\n", "\t", "\r", "\x1b", "\u0085"; an invalid byte:
// "\xc3"), so a name holding backslash-n and one holding a newline differ.
// Everything else, including valid non-ASCII UTF-8, is unchanged. Used for
// every name in human-readable output; --json output instead keeps exact
// strings (JSON-escaped).
std::string printable(std::string_view text);

// `text` in single quotes, escaped as printable() escapes it
// (detail::quote_name): how every human-readable line and message quotes a
// name, word, tag, entry or argument -- the library's Error messages too.
std::string quoted_name(std::string_view text);

// Text that is printable already or composed around escaped names -- an
// Error's what(), the library's rendered summaries -- kept so: control
// characters and invalid bytes escaped as printable() does, backslashes
// unchanged (detail::printable, which Error applies to its messages; so
// such text is not escaped twice). With `keep_lines`, '\n' and '\t' pass
// unchanged (multi-line text).
std::string printable_message(std::string_view text, bool keep_lines = false);

// `text` wrapped in the escape codes of `colour` when `on`, else unchanged.
std::string paint(std::string_view text, Colour colour, bool on);

}  // namespace modelzip::cli
