#include <doctest/doctest.h>

#include "modelzip/error.hpp"

#include <cerrno>
#include <cstring>

using namespace modelzip;

TEST_CASE("Error formats its context from outside in") {
  Error e(ErrorCode::corrupt, "invalid escape '%G1'", ErrorContext{.line = 3});
  CHECK(std::string(e.what()) == "line 3: invalid escape '%G1'");
  Error full = e.with_context({.archive = "model.zip", .entry = "v2/params.txt", .tag = "v2"});
  CHECK(std::string(full.what()) ==
        "model.zip: entry 'v2/params.txt': line 3: invalid escape '%G1'");
  CHECK(full.code() == ErrorCode::corrupt);
  CHECK(full.message() == "invalid escape '%G1'");
}

TEST_CASE("Inner context wins over outer context") {
  Error e(ErrorCode::io, "x", ErrorContext{.entry = "inner", .offset = 7});
  Error f = e.with_context({.archive = "a", .entry = "outer", .offset = 9});
  CHECK(f.context().entry == "inner");
  CHECK(*f.context().offset == 7);
  CHECK(f.context().archive == "a");
}

TEST_CASE("A tag is named when the entry does not already name it") {
  Error e(ErrorCode::not_found, "no parameter 'w'", ErrorContext{.archive = "m.zip", .tag = "v1"});
  CHECK(std::string(e.what()) == "m.zip: tag 'v1': no parameter 'w'");
  Error g(ErrorCode::corrupt, "bad", ErrorContext{.entry = "v1/params.txt", .tag = "v1"});
  CHECK(std::string(g.what()) == "entry 'v1/params.txt': bad");
}

TEST_CASE("Every code has a name") {
  for (auto c : {ErrorCode::io, ErrorCode::corrupt, ErrorCode::not_found,
                 ErrorCode::invalid_argument, ErrorCode::already_exists, ErrorCode::unsupported,
                 ErrorCode::limit_exceeded, ErrorCode::cancelled})
    CHECK(error_code_name(c) != "unknown");
}

TEST_CASE("The errno of a failed system call survives added context and rewording") {
  Error e = Error::from_errno("cannot open", ENOENT, ErrorContext{.archive = "/tmp/x/m.zip"});
  CHECK(e.code() == ErrorCode::io);
  CHECK(e.system_error() == ENOENT);
  CHECK(e.message() == std::string("cannot open: ") + std::strerror(ENOENT));
  CHECK(e.with_context({.tag = "v1"}).system_error() == ENOENT);
  Error r = e.reworded("finishing failed: " + e.message(), ErrorContext{.archive = "m.zip"});
  CHECK(r.system_error() == ENOENT);
  CHECK(r.code() == ErrorCode::io);
  CHECK(std::string(r.what()).rfind("m.zip: finishing failed: cannot open: ", 0) == 0);
  CHECK(Error(ErrorCode::io, "plain").system_error() == 0);
}

TEST_CASE("Messages are printable: bytes quoted from a file show as the CLI shows them") {
  // HDF5's signature quoted as a word2vec header, a name with an escape
  // sequence, a C1 control character and a byte that is not UTF-8.
  Error e(ErrorCode::corrupt, "rows: '\x89HDF\r\n\x1a\n' is not a number",
          ErrorContext{.entry = "w\x1b[2J\xc2\x85", .offset = 0});
  CHECK(e.message() == "rows: '\\x89HDF\\r\\n\\x1a\\n' is not a number");
  CHECK(std::string(e.what()) ==
        "entry 'w\\x1b[2J\\u0085': offset 0: rows: '\\x89HDF\\r\\n\\x1a\\n' is not a number");
  CHECK(e.context().entry == "w\x1b[2J\xc2\x85");  // the exact name, to look it up
  // Escaping again changes nothing: rewording and added context keep the text.
  Error f = e.with_context({.archive = "a\tb.zip"});
  CHECK(f.message() == e.message());
  CHECK(std::string(f.what()) == "a\\tb.zip: " + std::string(e.what()));
  CHECK(e.reworded(e.message(), {}).message() == e.message());
  // Backslashes and valid non-ASCII UTF-8 are kept.
  CHECK(Error(ErrorCode::corrupt, "C:\\x \xc3\xa9").message() == "C:\\x \xc3\xa9");
}
