// The check that readers of foreign files (tests/convert, tests/finalfusion)
// name the source they were given in their errors, and no file without one.
#pragma once

#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "modelzip/error.hpp"

namespace modelzip::testing {

// Reads a file that every reader refuses, naming `source` ("": none given).
using SourceReader = std::function<void(std::string_view source)>;

// Each reader (format name, reader) must throw Error whose context's archive
// is "" without a source and `source` with it; with it, what() starts with
// "SOURCE: ".
inline void check_errors_name_source(
    const std::vector<std::pair<std::string, SourceReader>>& readers, const std::string& source) {
  for (const auto& [format_name, read] : readers) {
    const std::string format = format_name;  // INFO captures it: clang 14 captures no binding
    INFO(format);
    for (const std::string& given : {std::string(), source}) {
      INFO(given);
      try {
        read(given);
        FAIL("accepted");
      } catch (const Error& e) {
        CHECK(e.context().archive == given);
        if (!given.empty()) CHECK(std::string(e.what()).starts_with(given + ": "));
      }
    }
  }
}

}  // namespace modelzip::testing
