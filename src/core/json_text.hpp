// JSON text output shared by every writer of JSON in modelzip: the CLI's
// --json modes (src/cli/json.hpp), the graph, training and summary renderers
// (src/graph/json_writer.hpp) and the safetensors header writer
// (src/convert/safetensors.cpp).
//
// Strings are escaped as serde_json (and so the safetensors reference
// implementation) writes them, RFC 8259: '"' and '\\' escaped, control
// characters U+0000..U+001F as \n \r \t \b \f or \u00XX, everything else
// (including valid non-ASCII UTF-8) unchanged. Parsing, with work limits and
// error offsets for untrusted headers, is src/convert/json_cursor.
//
// Why not a library (e.g. Debian's nlohmann-json3-dev): writing needs only
// these two functions, and byte-exact serde_json output; parsing untrusted
// safetensors headers needs byte offsets in errors, a depth and size limit
// and duplicate-key detection without building a DOM first, which
// json_cursor does in 240 lines.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace modelzip::detail {

// Appends `s` as a quoted JSON string.
void append_json_string(std::string& out, std::string_view s);
// `s` as a quoted JSON string.
std::string json_string(std::string_view s);
// The shortest "%.*g" text, with at least `min_precision` significant
// digits, that reads back to `v` (a `min_precision` of 6 keeps 100000 from
// becoming 1e+05). Precondition: `v` is finite (JSON has no NaN or
// infinity; callers choose what to write).
std::string json_double(double v, int min_precision = 1);

}  // namespace modelzip::detail
