// expect_error: code that must throw modelzip::Error of a code whose
// message() contains a text, the Error returned for further checks. Used by
// the graph and checkpoint suites (the zip, format, io, hostile and crash
// suites use the macros of tests/zip/expect_error.hpp).
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "modelzip/error.hpp"

namespace modelzip::testing {

// Runs `f`, which must throw Error(code) whose message() contains `text`
// (the test fails otherwise); returns the Error.
template <class F>
Error expect_error(F&& f, ErrorCode code, const std::string& text) {
  try {
    f();
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.code() == code);
    CHECK(e.message().find(text) != std::string::npos);
    return e;
  }
  FAIL("no error; expected: " << text);
  return Error(code, "unreachable");
}

}  // namespace modelzip::testing
