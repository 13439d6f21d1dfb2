// The strict JSON pull parser behind the safetensors header.
#include "convert/json_cursor.hpp"
#include "convert_test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;
using convert::detail::JsonCursor;

TEST_SUITE("convert") {
  TEST_CASE("json cursor: objects, arrays, strings, integers") {
    JsonCursor j(R"( { "a" : [ 0, 18446744073709551615 ], "b\u00e9\ud83d\ude00\n\"\\\/" : "x" } )",
                 100, "doc");
    j.begin_object();
    std::string key;
    REQUIRE(j.next_key(key));
    CHECK(key == "a");
    j.begin_array();
    REQUIRE(j.next_item());
    CHECK(j.read_uint() == 0);
    REQUIRE(j.next_item());
    CHECK(j.read_uint() == 18446744073709551615ull);
    CHECK_FALSE(j.next_item());
    REQUIRE(j.next_key(key));
    CHECK(key == "b\xC3\xA9\xF0\x9F\x98\x80\n\"\\/");
    CHECK(j.read_string() == "x");
    CHECK_FALSE(j.next_key(key));
    j.finish();
  }

  TEST_CASE("json cursor: strict errors with absolute offsets") {
    auto fails_at = [](std::string_view text, std::uint64_t offset) {
      try {
        JsonCursor j(text, 1000, "doc");
        j.begin_object();
        std::string key;
        while (j.next_key(key)) j.read_uint();
        j.finish();
        FAIL("accepted: " << text);
      } catch (const Error& e) {
        INFO(std::string(e.what()));
        CHECK(e.code() == ErrorCode::corrupt);
        REQUIRE(e.context().offset.has_value());
        CHECK(*e.context().offset == 1000 + offset);
        CHECK(e.message().rfind("doc: ", 0) == 0);
      }
    };
    fails_at(R"({"a":1,})", 7);
    fails_at(R"({"a":01})", 5);
    fails_at(R"({"a":-1})", 5);
    fails_at(R"({"a":1.5})", 5);
    fails_at(R"({"a":18446744073709551616})", 5);
    fails_at(R"({"a" 1})", 5);
    fails_at(R"({"a":1 "b":2})", 7);
    fails_at(R"({"a\x":1})", 3);
    fails_at(R"({"\udc00":1})", 2);
    fails_at(R"({"\ud800x":1})", 2);
    fails_at(R"({"a":1}})", 7);
    fails_at(R"({"a":1)", 6);
    fails_at("{\"\x01\":1}", 2);
    fails_at("{\"\xFF\":1}", 2);
  }

  TEST_CASE("json string output escapes as serde_json") {
    std::string out;
    convert::detail::append_json_string(out, std::string("a\"b\\c\n\x01\xC3\xA9/", 10));
    CHECK(out == "\"a\\\"b\\\\c\\n\\u0001\xC3\xA9/\"");
  }
}
