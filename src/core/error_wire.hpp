// An Error as text that crosses process boundaries whole: its code, bare
// message, errno value (system_error) and every context field (archive,
// entry, tag, line, offset). The collective writer sends a rank's failure
// to the others this way (Communicator::agree carries text), so that the
// error each rank throws keeps the failing rank's context.
//
// The text is printable ASCII and never empty: bytes outside 0x20..0x7E,
// '%' and '|' are percent-escaped, fields are separated by '|'. Pure
// functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "modelzip/error.hpp"

namespace modelzip::detail {

std::string encode_error(const Error& error);
// The Error encode_error wrote. Throws Error(corrupt) for any other text.
Error decode_error(std::string_view text);

}  // namespace modelzip::detail
