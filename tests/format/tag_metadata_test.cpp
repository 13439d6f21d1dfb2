// <tag>/metadata.toml: the safetensors "__metadata__" of a tag's source
// files; round trip of the writer with any strings, wrong types corrupt
// with the line, unknown keys ignored.
#include <doctest/doctest.h>

#include <string>

#include "../zip/expect_error.hpp"
#include "format/tag_metadata.hpp"
#include "modelzip/error.hpp"

using namespace modelzip;
using namespace modelzip::format;

TEST_CASE("Tag metadata: the text written for safetensors' usual metadata") {
  TagMetadata m;
  m.safetensors = {{"format", "pt"}};
  CHECK(write_tag_metadata(m) == "[safetensors]\nformat = \"pt\"\n");
  CHECK(parse_tag_metadata("[safetensors]\nformat = \"pt\"\n", {}) == m);
  CHECK(parse_tag_metadata("", {}).empty());
  CHECK(parse_tag_metadata("[safetensors]\n", {}).empty());
}

TEST_CASE("Tag metadata: any UTF-8 key and value round-trips") {
  TagMetadata m;
  m.safetensors = {{"", "empty key"},
                   {"a.b", "dotted key"},
                   {"[x]", "brackets"},
                   {"quote\"back\\slash", "\"\\"},
                   {"lines", "one\ntwo\r\n\tthree"},
                   {"nul", std::string("a\0b", 3)},
                   {"control", "\x01\x1f\x7f"},
                   {"gr\xC3\xBC\xC3\x9F"
                    "e",
                    "\xE2\x82\xAC \xF0\x9F\x98\x80"},
                   {"empty", ""},
                   {"json", "{\"total_size\": 1024, \"weight_map\": {}}"},
                   // Keys that toml++'s formatter wrote bare, which no parser
                   // reads back (found by fuzz_text_tables): a single quote,
                   // a line break, a tab.
                   {"a'b", "format"},
                   {"it's", "'"},
                   {"two\nlines", "key with a line break"},
                   {"tab\tbed", "key with a tab"},
                   {"'", "only a quote"}};
  const std::string text = write_tag_metadata(m);
  CHECK(parse_tag_metadata(text, {}) == m);
  CHECK(text.find("\"a'b\" = \"format\"\n") != std::string::npos);
}

TEST_CASE("Tag metadata: unknown keys and tables are ignored") {
  TagMetadata m = parse_tag_metadata(
      "version = 3\n[safetensors]\nformat = \"pt\"\n[npz]\nx = 1\n[later.table]\ny = [1]\n", {});
  CHECK(m.safetensors == std::map<std::string, std::string>{{"format", "pt"}});
}

TEST_CASE("Tag metadata: wrong types, syntax errors and sizes name the line or limit") {
  REQUIRE_ERROR_AS(t, parse_tag_metadata("\nsafetensors = \"pt\"\n", {}), ErrorCode::corrupt,
                   "safetensors must be a table");
  CHECK(t.context().line == 2u);
  REQUIRE_ERROR_AS(v, parse_tag_metadata("[safetensors]\nformat = \"pt\"\nsize = 3\n", {}),
                   ErrorCode::corrupt, "safetensors.size must be a string");
  CHECK(v.context().line == 3u);
  CHECK_ERROR(parse_tag_metadata("[safetensors]\nx = { a = \"b\" }\n", {}), ErrorCode::corrupt,
              "safetensors.x must be a string");
  REQUIRE_ERROR_AS(s, parse_tag_metadata("[safetensors]\nformat = \"pt\nx = 1\n", {}),
                   ErrorCode::corrupt, "TOML syntax error");
  CHECK(s.context().line == 2u);
  CHECK_ERROR(parse_tag_metadata("[safetensors]\nx = \"\xFF\"\n", {}), ErrorCode::corrupt,
              "TOML syntax error");
  CHECK_ERROR(parse_tag_metadata("\xEF\xBB\xBF[safetensors]\n", {}), ErrorCode::corrupt,
              "byte-order mark");
  Limits small;
  small.max_text_entry_bytes = 10;
  CHECK_ERROR(parse_tag_metadata("[safetensors]\nformat = \"pt\"\n", small),
              ErrorCode::limit_exceeded, "too large");
}

TEST_CASE("Tag metadata: the torch table is written beside the free-form pairs, or alone") {
  TagMetadata m;
  m.torch = {{"state_dict_metadata", "{\"\": {\"version\": 2}}"}};
  const std::string alone = write_tag_metadata(m);
  CHECK(alone == "[torch]\nstate_dict_metadata = \"{\\\"\\\": {\\\"version\\\": 2}}\"\n");
  CHECK(parse_tag_metadata(alone, {}) == m);
  m.safetensors = {{"format", "pt"}};
  CHECK(parse_tag_metadata(write_tag_metadata(m), {}) == m);
  REQUIRE_ERROR_AS(t, parse_tag_metadata("[torch]\nstate_dict_metadata = 2\n", {}),
                   ErrorCode::corrupt, "torch.state_dict_metadata must be a string");
  CHECK(t.context().line == 2u);
}
