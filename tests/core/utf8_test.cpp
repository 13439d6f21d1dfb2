#include <doctest/doctest.h>

#include "core/utf8.hpp"

using namespace modelzip::detail;

TEST_CASE("UTF-8 validation rejects what RFC 3629 forbids") {
  CHECK(utf8_valid("plain ascii"));
  CHECK(
      utf8_valid("gr\xC3\xBC\xC3\x9F"
                 "e \xE2\x82\xAC \xF0\x9F\x98\x80"));
  CHECK(utf8_invalid_at("ab\xC0\xAF") == 2);         // overlong '/'
  CHECK(utf8_invalid_at("\xED\xA0\x80") == 0);       // surrogate U+D800
  CHECK(utf8_invalid_at("x\xF4\x90\x80\x80") == 1);  // above U+10FFFF
  CHECK(utf8_invalid_at("abc\xE2\x82") == 3);        // truncated
  CHECK(utf8_invalid_at("\x80") == 0);               // lone continuation
}

TEST_CASE("Lossy decoding replaces maximal invalid subparts") {
  // Truncated 3-byte sequence followed by ASCII: one replacement.
  CHECK(utf8_lossy("a\xE2\x82z") == "a\xEF\xBF\xBDz");
  // Two lone continuation bytes: two replacements.
  CHECK(utf8_lossy("\x80\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(utf8_lossy("ok") == "ok");
}

TEST_CASE("Decode and encode code points") {
  auto cps = utf8_decode("a\xC3\xBC\xE2\x82\xAC\xF0\x9F\x98\x80");
  REQUIRE(cps.size() == 4);
  CHECK(cps[0] == U'a');
  CHECK(cps[1] == U'\u00FC');
  CHECK(cps[2] == U'\u20AC');
  CHECK(cps[3] == U'\U0001F600');
  std::string out;
  for (auto c : cps) utf8_append(out, c);
  CHECK(out == "a\xC3\xBC\xE2\x82\xAC\xF0\x9F\x98\x80");
}
