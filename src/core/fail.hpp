// One throw helper per failure kind, for code that fails in many places:
// each throws modelzip::Error with that code, the message and the context
// given (parsers pass what they know: entry, line, offset; callers further
// out add the rest with Error::with_context). Errors of system calls go
// through io::throw_errno / io::errno_error instead, which add strerror and
// the errno value.
#pragma once

#include <string>

#include "modelzip/error.hpp"

namespace modelzip::detail {

[[noreturn]] void fail(ErrorCode code, std::string message, ErrorContext context = {});
// Bytes that do not follow the format (untrusted input).
[[noreturn]] void fail_corrupt(std::string message, ErrorContext context = {});
// A request the caller should not have made.
[[noreturn]] void fail_invalid(std::string message, ErrorContext context = {});
// A valid but unsupported feature.
[[noreturn]] void fail_unsupported(std::string message, ErrorContext context = {});

}  // namespace modelzip::detail
