// core/error_wire.hpp: an Error survives encode_error / decode_error whole,
// as printable ASCII, and other text is refused as corrupt.
#include <doctest/doctest.h>

#include <cerrno>
#include <string>

#include "core/error_wire.hpp"
#include "modelzip/error.hpp"

using namespace modelzip;

namespace {

void check_same(const Error& a, const Error& b) {
  CHECK(a.code() == b.code());
  CHECK(a.message() == b.message());
  CHECK(a.system_error() == b.system_error());
  CHECK(a.context().archive == b.context().archive);
  CHECK(a.context().entry == b.context().entry);
  CHECK(a.context().tag == b.context().tag);
  CHECK(a.context().line == b.context().line);
  CHECK(a.context().offset == b.context().offset);
  CHECK(std::string(a.what()) == std::string(b.what()));
}

bool printable_ascii(const std::string& s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7E) return false;
  return true;
}

}  // namespace

TEST_CASE("encode_error keeps the code, message, errno value and every context field") {
  const Error corrupt(ErrorCode::corrupt, "invalid escape '%G1' | not \"a\"\nb",
                      ErrorContext{.archive = "/tmp/m\xC3\xA9.zip",
                                   .entry = "v1/params.txt",
                                   .tag = "v1",
                                   .line = 3,
                                   .offset = 0});
  const Error io = Error::from_errno("cannot write", EIO,
                                     ErrorContext{.archive = "a.zip", .offset = 1ull << 40});
  const Error bare(ErrorCode::cancelled, "");
  for (const Error* e : {&corrupt, &io, &bare}) {
    const std::string text = detail::encode_error(*e);
    CAPTURE(text);
    CHECK(!text.empty());
    CHECK(printable_ascii(text));
    check_same(detail::decode_error(text), *e);
  }
  CHECK(detail::decode_error(detail::encode_error(io)).system_error() == EIO);
  CHECK(!detail::decode_error(detail::encode_error(bare)).context().line);
  CHECK(!detail::decode_error(detail::encode_error(bare)).context().offset);
}

TEST_CASE("decode_error refuses other text as corrupt") {
  const std::string good =
      detail::encode_error(Error(ErrorCode::not_found, "x", ErrorContext{.line = 1}));
  std::string no_magic = good;
  no_magic[0] = 'M';
  const std::string cases[] = {
      "",
      "3|message",  // the old "int|message" form
      no_magic,
      good + "|",
      good.substr(0, good.rfind('|')),
      "modelzip-error 1|no_such_code|0|m|||||",
      "modelzip-error 1|io|x|m|||||",
      "modelzip-error 1|corrupt|5|m|||||",  // errno values come with io only
      "modelzip-error 1|io|0|bad %4|||||",
      "modelzip-error 1|io|0|bad %zz|||||",
      "modelzip-error 1|io|0|m||||-1|",
      "modelzip-error 1|io|0|m|||||18446744073709551616",
  };
  for (const std::string& text : cases) {
    CAPTURE(text);
    try {
      (void)detail::decode_error(text);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::corrupt);
    }
  }
}
