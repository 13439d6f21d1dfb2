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

TEST_CASE("The escape form is valid UTF-8 and reverses exactly") {
  using modelzip::detail::utf8_escape;
  using modelzip::detail::utf8_unescape;
  using modelzip::detail::utf8_valid;
  // Examples written out by hand from the definition.
  CHECK(utf8_escape("caf\xE9") == "caf\\xe9");
  CHECK(utf8_escape("a\\b") == "a\\\\b");
  CHECK(utf8_escape("caf\xC3\xA9") == "caf\xC3\xA9");       // valid: kept
  CHECK(utf8_escape("\xF0\x9F\x98") == "\\xf0\\x9f\\x98");  // truncated 4-byte sequence
  CHECK(utf8_escape("\xED\xA0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  CHECK(utf8_escape("\\xe9") == "\\\\xe9");                 // text that looks escaped
  CHECK(*utf8_unescape("caf\\xE9") == "caf\xE9");           // either hex case
  for (const char* bad : {"\\", "a\\q", "\\x4", "\\xzz", "\\x"}) CHECK_FALSE(utf8_unescape(bad));
  // Every string of up to two bytes, and pseudo-random longer ones.
  std::string s;
  for (int a = -1; a < 256; ++a)
    for (int b = -1; b < 256; ++b) {
      s.clear();
      if (a >= 0) s += static_cast<char>(a);
      if (b >= 0) s += static_cast<char>(b);
      const std::string e = utf8_escape(s);
      REQUIRE(utf8_valid(e));
      REQUIRE(utf8_unescape(e) == s);
      REQUIRE(modelzip::detail::utf8_needs_escape(s) == (e != s));
    }
  std::uint32_t x = 12345;
  for (int i = 0; i < 2000; ++i) {
    s.clear();
    for (int k = 0; k < 12; ++k) {
      x = x * 1664525u + 1013904223u;
      s += static_cast<char>(x >> 24);
    }
    const std::string e = utf8_escape(s);
    REQUIRE(utf8_valid(e));
    REQUIRE(utf8_unescape(e) == s);
  }
}
