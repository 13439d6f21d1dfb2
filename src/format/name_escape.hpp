// Escaping of parameter, variable and state names in params.txt and
// updater.txt, so that every UTF-8 name (with spaces, '/', '#', newlines...)
// fits on one line as one space-free field.
//
// Escape: percent-encoding of the bytes '%' (0x25), '#' (0x23), every byte up
// to and including space (0x00-0x20) and DEL (0x7F), written as '%' and two
// upper-case hex digits. Every other byte is written as is (so non-ASCII
// UTF-8 stays readable). Unescape accepts upper- or lower-case hex digits.
#pragma once

#include <string>
#include <string_view>

namespace modelzip::format {

std::string escape_name(std::string_view name);
// Throws Error(corrupt) (message names the column) for a malformed escape, a
// byte that should have been escaped, an empty result, or a result that is
// not valid UTF-8.
std::string unescape_name(std::string_view field);

}  // namespace modelzip::format
