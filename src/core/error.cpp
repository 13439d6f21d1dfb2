#include "modelzip/error.hpp"

#include <cstring>

#include "core/printable.hpp"

namespace modelzip {

std::string_view error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::io:
      return "io";
    case ErrorCode::corrupt:
      return "corrupt";
    case ErrorCode::not_found:
      return "not_found";
    case ErrorCode::invalid_argument:
      return "invalid_argument";
    case ErrorCode::already_exists:
      return "already_exists";
    case ErrorCode::unsupported:
      return "unsupported";
    case ErrorCode::limit_exceeded:
      return "limit_exceeded";
    case ErrorCode::cancelled:
      return "cancelled";
  }
  return "unknown";
}

// Messages quote names and bytes from untrusted files: message() and what()
// are printable (control characters and invalid UTF-8 escaped), the same
// text in every binding; context() keeps the exact names.
Error::Error(ErrorCode code, std::string message, ErrorContext context)
    : std::runtime_error(detail::printable(format(message, context))),
      code_(code),
      message_(detail::printable(message)),
      context_(std::move(context)) {}

Error Error::from_errno(const std::string& what, int errnum, ErrorContext context) {
  Error e(ErrorCode::io, what + ": " + std::strerror(errnum), std::move(context));
  e.system_error_ = errnum;
  return e;
}

Error Error::with_context(const ErrorContext& outer) const {
  ErrorContext merged = context_;
  if (merged.archive.empty()) merged.archive = outer.archive;
  if (merged.entry.empty()) merged.entry = outer.entry;
  if (merged.tag.empty()) merged.tag = outer.tag;
  if (!merged.line) merged.line = outer.line;
  if (!merged.offset) merged.offset = outer.offset;
  return reworded(message_, std::move(merged));
}

Error Error::reworded(std::string message, ErrorContext context) const {
  Error e(code_, std::move(message), std::move(context));
  e.system_error_ = system_error_;
  return e;
}

std::string Error::format(const std::string& message, const ErrorContext& c) {
  std::string out;
  auto part = [&out](const std::string& s) {
    if (!out.empty()) out += ": ";
    out += s;
  };
  if (!c.archive.empty()) part(detail::printable_name(c.archive));
  if (!c.entry.empty()) part("entry " + detail::quote_name(c.entry));
  if (!c.tag.empty() && c.entry.find(c.tag + "/") != 0) part("tag " + detail::quote_name(c.tag));
  if (c.line) part("line " + std::to_string(*c.line));
  if (c.offset) part("offset " + std::to_string(*c.offset));
  part(message);
  return out;
}

}  // namespace modelzip
