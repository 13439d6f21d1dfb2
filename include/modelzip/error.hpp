// The one error model of modelzip: every failure is thrown as modelzip::Error.
//
// An Error carries a machine-readable code, a bare message, and the context
// where it happened (archive, entry, tag, line, byte offset). Parsers fill in
// what they know (line, offset); callers further out add the entry, tag and
// archive with Error::with_context as the error propagates, so the final
// what() reads like:
//   "model.zip: entry 'v2/params.txt': line 3: invalid escape '%G1'"
// message() and what() are printable: control characters and invalid UTF-8
// escaped ("\r", "\x1a"), a quoted name's backslash doubled ('a\\nb'), the
// same text in every binding; context() keeps the exact names.
//
// Thread safety: Error is an immutable value type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "modelzip/export.hpp"

namespace modelzip {

enum class ErrorCode {
  io,                // the operating system refused a read, write, sync, rename...
  corrupt,           // bytes that do not follow the format (untrusted input)
  not_found,         // a tag, parameter or entry that does not exist
  invalid_argument,  // the caller asked for something impossible
  already_exists,    // e.g. a tag that exists already (in any letter case)
  unsupported,       // a valid but unsupported feature (format version, data type...)
  limit_exceeded,    // a work or size limit protecting against hostile input
  cancelled,         // a progress callback asked to stop
};

// "ok", "io", "corrupt"...: the name of `code` (messages, the Python and
// Java bindings, the error wire format).
MODELZIP_API std::string_view error_code_name(ErrorCode code) noexcept;

struct MODELZIP_API ErrorContext {
  std::string archive{};                  // path or name of the archive (or standalone file)
  std::string entry{};                    // entry name inside the archive
  std::string tag{};                      // checkpoint tag
  std::optional<std::uint64_t> line{};    // 1-based line in a text entry
  std::optional<std::uint64_t> offset{};  // byte offset inside the entry or file
};

class MODELZIP_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message, ErrorContext context = {});

  // An ErrorCode::io failure of a system call: the message is
  // "<what>: <strerror(errnum)>" and system_error() returns errnum, so front
  // ends can tell a missing file (ENOENT) from a permission problem (EACCES).
  static Error from_errno(const std::string& what, int errnum, ErrorContext context = {});

  ErrorCode code() const noexcept { return code_; }
  // message() and context() of an rvalue Error (a temporary) are copies,
  // which outlive it.
  const std::string& message() const& noexcept { return message_; }
  std::string message() const&& { return message_; }
  const ErrorContext& context() const& noexcept { return context_; }
  ErrorContext context() const&& { return context_; }
  // The errno value of a failed system call (see from_errno); 0 otherwise.
  int system_error() const noexcept { return system_error_; }

  // A copy in which every context field that is still empty is taken from
  // `outer`. Fields already set (closer to the fault) win.
  Error with_context(const ErrorContext& outer) const;

  // A copy with another message and context that keeps code() and
  // system_error(): for callers that reword an error or rename its archive.
  Error reworded(std::string message, ErrorContext context) const;

 private:
  static std::string format(const std::string& message, const ErrorContext& context);

  ErrorCode code_;
  std::string message_;
  ErrorContext context_;
  int system_error_ = 0;
};

namespace detail {
// False for every N: the condition of the static_assert in the overloads
// that reject a braced list of strings where one tag is expected, as in
// `archive.load({"a", "b"})`. Without them the list would construct the
// tag's std::string_view (or std::string) through its (first, last)
// constructor from two unrelated pointers: undefined behaviour at run time.
// They take `const char* const (&)[N]` with N >= 2, which the list matches
// better than the string's constructor; `{}` and `{"a"}` are not matched.
template <std::size_t N>
inline constexpr bool braced_list_is_a_tag = false;
}  // namespace detail

}  // namespace modelzip
