#include "core/fail.hpp"

namespace modelzip::detail {

void fail(ErrorCode code, std::string message, ErrorContext context) {
  throw Error(code, std::move(message), std::move(context));
}

void fail_corrupt(std::string message, ErrorContext context) {
  throw Error(ErrorCode::corrupt, std::move(message), std::move(context));
}

void fail_invalid(std::string message, ErrorContext context) {
  throw Error(ErrorCode::invalid_argument, std::move(message), std::move(context));
}

void fail_unsupported(std::string message, ErrorContext context) {
  throw Error(ErrorCode::unsupported, std::move(message), std::move(context));
}

}  // namespace modelzip::detail
