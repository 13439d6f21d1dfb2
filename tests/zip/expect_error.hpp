// Checking that code throws modelzip::Error with a given code, message part
// and context. Used by the zip, format, io, hostile and crash suites.
#pragma once

#include <doctest/doctest.h>

#include <optional>
#include <span>
#include <string>

#include "modelzip/error.hpp"

namespace modelzip::testing {

// The Error thrown by `f`, or nullopt if it returned normally. Other
// exceptions propagate (and fail the test).
template <class F>
std::optional<Error> caught(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

inline std::span<const std::byte> span_of(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace modelzip::testing

// Requires that `expr` throws modelzip::Error with code `code_` and a what()
// containing `substr`; binds the Error to `err_var` for further checks.
#define REQUIRE_ERROR_AS(err_var, expr, code_, substr)                                             \
  auto err_var##_opt = ::modelzip::testing::caught([&] { (void)(expr); });                         \
  REQUIRE_MESSAGE(err_var##_opt.has_value(), "expected modelzip::Error from: " #expr);             \
  const ::modelzip::Error& err_var = *err_var##_opt;                                               \
  CHECK_MESSAGE(err_var.code() == (code_),                                                         \
                "code " << ::modelzip::error_code_name(err_var.code()) << ": " << err_var.what()); \
  CHECK_MESSAGE(std::string(err_var.what()).find(substr) != std::string::npos,                     \
                std::string(err_var.what()))

#define CHECK_ERROR(expr, code_, substr)                                                          \
  do {                                                                                            \
    auto mz_err_ = ::modelzip::testing::caught([&] { (void)(expr); });                            \
    REQUIRE_MESSAGE(mz_err_.has_value(), "expected modelzip::Error from: " #expr);                \
    CHECK_MESSAGE(mz_err_->code() == (code_), "code "                                             \
                                                  << ::modelzip::error_code_name(mz_err_->code()) \
                                                  << ": " << mz_err_->what());                    \
    CHECK_MESSAGE(std::string(mz_err_->what()).find(substr) != std::string::npos,                 \
                  std::string(mz_err_->what()));                                                  \
  } while (0)
