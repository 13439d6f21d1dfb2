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

}  // namespace modelzip::detail
