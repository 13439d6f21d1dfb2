// Text safe to show: what the CLI prints and what Error messages hold.
// Thread safety: a pure function.
#pragma once

#include <string>
#include <string_view>

namespace modelzip::detail {

// `text` safe to show on a terminal or in an error message: C0 control
// characters, DEL, C1 control characters (U+0080..U+009F) and bytes that
// are not valid UTF-8 become visible escapes ("\n", "\t", "\r", "\x1b",
// "\u0085"; an invalid byte: "\xc3"). With `keep_lines`, '\n' and '\t' pass
// unchanged. Everything else, including valid non-ASCII UTF-8 and
// backslashes, is unchanged, so printable(printable(t)) == printable(t).
// Error applies it to its messages; the CLI to every human-readable line.
std::string printable(std::string_view text, bool keep_lines = false);

// printable(text) that reads back unambiguously, for names, words, tags and
// values of untrusted files in human-readable listings: a backslash becomes
// "\\" first, so the name of the two characters '\' 'n' shows as "\\n" and
// the name holding a newline as "\n". Apply it once, to the raw string (it
// doubles the backslashes of a text it escaped before).
std::string printable_name(std::string_view text);

// A name from a file or from the user inside a message or a line of text:
// "'" + printable_name(name) + "'". Every message that quotes a name (an
// entry, tag, parameter, word, blob reference) quotes it through this, so a
// name reads back one way in errors, verify's lines and listings alike.
std::string quote_name(std::string_view name);

}  // namespace modelzip::detail
