// modelzip.toml: required version, newer versions unsupported, wrong types
// corrupt (with the line), unknown keys ignored, round trip of the writer.
#include <doctest/doctest.h>

#include "../zip/expect_error.hpp"
#include "format/archive_metadata.hpp"
#include "modelzip/error.hpp"

using namespace modelzip;
using namespace modelzip::format;

TEST_CASE("Metadata: a complete file and the smallest one") {
  Metadata m = parse_metadata(
      "format_version = 1\n"
      "writer = \"modelzip 9.9\"\n"
      "[model]\n"
      "name = \"bert\"\n"
      "version = \"2.0\"\n"
      "quantization = \"int8-per-channel\"\n"
      "description = \"multi\\nline \\u00e9\"\n",
      {});
  CHECK(m.format_version == 1);
  CHECK(m.writer == "modelzip 9.9");
  CHECK(m.model_name == "bert");
  CHECK(m.model_version == "2.0");
  CHECK(m.quantization == "int8-per-channel");
  CHECK(m.description == "multi\nline \xC3\xA9");

  Metadata minimal = parse_metadata("format_version = 1", {});
  CHECK(minimal == Metadata{});  // every optional field absent, writer defaults
  CHECK(minimal.writer == "modelzip");
}

TEST_CASE("Metadata: unknown keys and tables are ignored") {
  Metadata m = parse_metadata(
      "format_version = 1\nfuture = [1, 2, 3]\n[model]\nname = \"x\"\nlayers = 12\n"
      "[something.else]\nkey = true\n",
      {});
  CHECK(m.model_name == "x");
  CHECK_FALSE(m.model_version.has_value());
  // Unknown keys of any type in [model] too (FORMAT.md section 3): only the
  // four known keys must be strings.
  Metadata typed = parse_metadata(
      "format_version = 1\n[model]\nversion = \"2\"\nlayers = 12\nsizes = [1, 2]\n"
      "flags = { a = true }\nwhen = 1979-05-27\n[model.sub]\nx = 1.5\n",
      {});
  CHECK(typed.model_version == "2");
  CHECK_ERROR(parse_metadata("format_version = 1\n[model]\nname = 12\n", {}), ErrorCode::corrupt,
              "model.name must be a string");
}

TEST_CASE("Metadata: the version is required, positive, and not newer than the reader") {
  CHECK_ERROR(parse_metadata("", {}), ErrorCode::corrupt, "format_version is missing");
  CHECK_ERROR(parse_metadata("[model]\nformat_version = 1\n", {}), ErrorCode::corrupt,
              "format_version is missing");
  CHECK_ERROR(parse_metadata("format_version = 2\n", {}), ErrorCode::unsupported,
              "format version 2 is newer than this reader (1)");
  CHECK_ERROR(parse_metadata("format_version = 9223372036854775807\n", {}), ErrorCode::unsupported,
              "newer");
  REQUIRE_ERROR_AS(zero, parse_metadata("\n\nformat_version = 0\n", {}), ErrorCode::corrupt,
                   "format_version must be a positive integer");
  CHECK(zero.context().line == 3u);
  CHECK_ERROR(parse_metadata("format_version = -1\n", {}), ErrorCode::corrupt, "positive integer");
}

TEST_CASE("Metadata: wrong types are corrupt and name the line") {
  REQUIRE_ERROR_AS(s, parse_metadata("format_version = \"1\"\n", {}), ErrorCode::corrupt,
                   "format_version must be a positive integer");
  CHECK(s.context().line == 1u);
  CHECK_ERROR(parse_metadata("format_version = [1]\n", {}), ErrorCode::corrupt, "format_version");
  CHECK_ERROR(parse_metadata("format_version = 1.5\n", {}), ErrorCode::corrupt, "format_version");
  CHECK_ERROR(parse_metadata("format_version = 1.0\n", {}), ErrorCode::corrupt, "format_version");
  CHECK_ERROR(parse_metadata("format_version = true\n", {}), ErrorCode::corrupt, "format_version");
  CHECK_ERROR(parse_metadata("format_version = 1979-05-27\n", {}), ErrorCode::corrupt,
              "format_version");
  REQUIRE_ERROR_AS(w, parse_metadata("format_version = 1\nwriter = 3\n", {}), ErrorCode::corrupt,
                   "writer must be a string");
  CHECK(w.context().line == 2u);
  REQUIRE_ERROR_AS(m, parse_metadata("format_version = 1\nmodel = \"bert\"\n", {}),
                   ErrorCode::corrupt, "model must be a table");
  CHECK(m.context().line == 2u);
  CHECK_ERROR(parse_metadata("format_version = 1\nmodel = [1]\n", {}), ErrorCode::corrupt,
              "model must be a table");
  REQUIRE_ERROR_AS(n,
                   parse_metadata("format_version = 1\n[model]\nname = \"a\"\nversion = 2\n", {}),
                   ErrorCode::corrupt, "model.version must be a string");
  CHECK(n.context().line == 4u);
  CHECK_ERROR(parse_metadata("format_version = 1\n[model]\nquantization = {a = 1}\n", {}),
              ErrorCode::corrupt, "model.quantization must be a string");
  CHECK_ERROR(parse_metadata("format_version = 1\n[model]\ndescription = false\n", {}),
              ErrorCode::corrupt, "model.description must be a string");
  CHECK_ERROR(parse_metadata("format_version = 1\nmodel.name = 1\n", {}), ErrorCode::corrupt,
              "model.name must be a string");
}

TEST_CASE("Metadata: TOML syntax errors carry the line") {
  REQUIRE_ERROR_AS(e, parse_metadata("format_version = 1\nwriter = \"unterminated\n", {}),
                   ErrorCode::corrupt, "TOML syntax error");
  CHECK(e.context().line == 2u);
  CHECK_ERROR(parse_metadata("format_version = 1\nformat_version = 1\n", {}), ErrorCode::corrupt,
              "TOML syntax error");
  CHECK_ERROR(parse_metadata("format_version = 99999999999999999999\n", {}), ErrorCode::corrupt,
              "TOML syntax error");
  CHECK_ERROR(parse_metadata("format_version = 1\nwriter = \"\xFF\"\n", {}), ErrorCode::corrupt,
              "TOML syntax error");
  CHECK_ERROR(parse_metadata(std::string("format_version = 1\n\0", 20), {}), ErrorCode::corrupt,
              "TOML syntax error");
}

TEST_CASE("Metadata: deep nesting and large inputs give an Error, not a crash") {
  std::string deep_array =
      "format_version = 1\nx = " + std::string(100000, '[') + std::string(100000, ']') + "\n";
  CHECK_ERROR(parse_metadata(deep_array, {}), ErrorCode::corrupt, "TOML syntax error");
  std::string deep_table = "format_version = 1\nx = ";
  for (int i = 0; i < 100000; ++i) deep_table += "{a = ";
  deep_table += "1" + std::string(100000, '}') + "\n";
  CHECK_ERROR(parse_metadata(deep_table, {}), ErrorCode::corrupt, "TOML syntax error");
  Limits small;
  small.max_text_entry_bytes = 10;
  CHECK_ERROR(parse_metadata("format_version = 1\n", small), ErrorCode::limit_exceeded,
              "metadata entry is too large");
}

TEST_CASE("Metadata: write then parse gives it back") {
  Metadata m;
  m.model_name = "name with \"quotes\" and \\ backslash";
  m.model_version = "";
  m.quantization = "none";
  m.description = "line 1\nline 2\t\xE2\x9C\x93 \x01 control";
  m.writer = "modelzip 0.1.0";
  std::string text = write_metadata(m);
  CHECK(text.find("format_version = 1") != std::string::npos);
  CHECK(parse_metadata(text, {}) == m);
  Metadata plain;
  CHECK(parse_metadata(write_metadata(plain), {}) == plain);
  CHECK(write_metadata(plain).find("[model]") == std::string::npos);
}

TEST_CASE("Metadata: values that begin or end with line breaks survive a round trip") {
  // TOML drops a newline right after the opening delimiter of a multi-line
  // string, so the writer must not use one (found by fuzz_text_tables).
  for (const char* value : {"\nleading", "\n", "\r\nx", "trailing\n", "a\n\nb", "'''", "\"\"\""}) {
    CAPTURE(value);
    Metadata m;
    m.model_name = value;
    m.description = std::string(value) + value;
    std::string text = write_metadata(m);
    // One line per key: no value is spread over lines.
    CHECK(text.find("name = \"") != std::string::npos);
    CHECK(parse_metadata(text, {}) == m);
  }
}

TEST_CASE("Metadata: a value that is not UTF-8 is refused, naming the key") {
  // TOML strings are Unicode text; bytes that are not UTF-8 would not read
  // back as given (toml++ wrote them and they read back as other characters).
  Metadata m;
  m.model_name = "ok \xC3\xA9";
  m.description = "bad \xFF\xFE";
  CHECK_ERROR(write_metadata(m), ErrorCode::invalid_argument,
              "metadata model.description is not UTF-8 text (invalid byte at index 4)");
  m.description.reset();
  m.writer = "w\xC0\x80";  // an overlong NUL
  CHECK_ERROR(check_metadata(m), ErrorCode::invalid_argument, "metadata writer is not UTF-8");
  m.writer = "modelzip";
  CHECK_NOTHROW(check_metadata(m));
}
