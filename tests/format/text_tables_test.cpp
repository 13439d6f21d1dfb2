// The text codecs: line splitting, tag names, tags.txt, name escaping, blob
// references, params.txt / updater.txt tables. Expected values come from the
// rules in FORMAT.md sections 4.1 and 4.2, written out by hand.
#include <doctest/doctest.h>

#include "../zip/expect_error.hpp"
#include "core/utf8.hpp"
#include "format/archive_metadata.hpp"
#include "format/blob_table.hpp"
#include "format/name_escape.hpp"
#include "format/tag_name.hpp"
#include "format/tags_file.hpp"
#include "format/text_lines.hpp"
#include "modelzip/error.hpp"

using namespace modelzip;
using namespace modelzip::format;
using namespace modelzip::testing;

namespace {

std::vector<std::string> texts(const std::vector<TextLine>& lines) {
  std::vector<std::string> out;
  for (const auto& l : lines) out.emplace_back(l.text);
  return out;
}

using Strings = std::vector<std::string>;

}  // namespace

// ---- text_lines -------------------------------------------------------------

TEST_CASE("split_lines: line ends, the optional last newline, line numbers") {
  CHECK(split_lines("", {}).empty());
  CHECK(texts(split_lines("a", {})) == Strings{"a"});
  CHECK(texts(split_lines("a\n", {})) == Strings{"a"});
  CHECK(texts(split_lines("a\nb", {})) == Strings{"a", "b"});
  CHECK(texts(split_lines("a\n\nb\n", {})) == Strings{"a", "", "b"});
  CHECK(texts(split_lines("\n", {})) == Strings{""});
  auto lines = split_lines("x\ny\nz", {});
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].number == 1);
  CHECK(lines[2].number == 3);
}

TEST_CASE("split_lines: invalid UTF-8, carriage returns and NUL name the line") {
  REQUIRE_ERROR_AS(e1, split_lines("ok\nab\xFFz\n", {}), ErrorCode::corrupt,
                   "invalid UTF-8 at column 3");
  CHECK(e1.context().line == 2u);
  REQUIRE_ERROR_AS(e2, split_lines("a\r\nb", {}), ErrorCode::corrupt, "carriage return");
  CHECK(e2.context().line == 1u);
  REQUIRE_ERROR_AS(e3, split_lines(std::string("a\nb\nc\0d", 7), {}), ErrorCode::corrupt,
                   "NUL byte in line");
  CHECK(e3.context().line == 3u);
  // Truncated multi-byte sequence at the very end of the text.
  REQUIRE_ERROR_AS(e4, split_lines("a\n\xE2\x82", {}), ErrorCode::corrupt, "invalid UTF-8");
  CHECK(e4.context().line == 2u);
  // Overlong encodings and surrogates are invalid.
  CHECK_ERROR(split_lines("\xC0\x80", {}), ErrorCode::corrupt, "invalid UTF-8 at column 1");
  CHECK_ERROR(split_lines("x\xED\xA0\x80", {}), ErrorCode::corrupt, "invalid UTF-8 at column 2");
}

TEST_CASE("split_lines: the size limit") {
  Limits limits;
  limits.max_text_entry_bytes = 4;
  CHECK(split_lines("abcd", limits).size() == 1);
  CHECK_ERROR(split_lines("abcde", limits), ErrorCode::limit_exceeded,
              "text entry of 5 bytes exceeds the limit of 4");
}

// ---- tag names ---------------------------------------------------------------

TEST_CASE("Tag names: what is allowed") {
  for (std::string tag : {"a", "v1", "step-100", "A_b+c=d@e-f.g", "x.y.z", "0", "com10", "con1",
                          "conx", "Lpt0", "nul_", "-", "@", "_.a"})
    CHECK_MESSAGE(invalid_tag_reason(tag).empty(), tag);
  CHECK(invalid_tag_reason(std::string(100, 't')).empty());
}

TEST_CASE("Tag names: every rule, with its message") {
  CHECK(invalid_tag_reason("") == "a tag must not be empty");
  CHECK(invalid_tag_reason(std::string(101, 't')) == "a tag is at most 100 characters");
  CHECK(invalid_tag_reason("a b") ==
        "' ' at position 1 is not allowed in a tag (allowed: ASCII letters, digits and . _ + = @ "
        "-)");
  CHECK(invalid_tag_reason("a/b").find("'/' at position 1") != std::string::npos);
  CHECK(invalid_tag_reason("a\\b").find("'\\' at position 1") != std::string::npos);
  CHECK(invalid_tag_reason("ab:").find("':' at position 2") != std::string::npos);
  CHECK(invalid_tag_reason("a\xC3\xA9").find("'\xC3\xA9' (U+00E9) at position 1 is not allowed") !=
        std::string::npos);
  CHECK(invalid_tag_reason("\xC3").find("byte 0xC3 at position 0") != std::string::npos);
  CHECK(invalid_tag_reason("a\x1b").find("U+001B at position 1") != std::string::npos);
  CHECK(invalid_tag_reason("a\x1b").find('\x1b') == std::string::npos);
  CHECK(invalid_tag_reason("a\nb").find("U+000A at position 1") != std::string::npos);
  CHECK(invalid_tag_reason(std::string("a\0", 2)).find("U+0000 at position 1") !=
        std::string::npos);
  CHECK(invalid_tag_reason(".a") == "a tag must not start or end with '.'");
  CHECK(invalid_tag_reason("a.") == "a tag must not start or end with '.'");
  CHECK(invalid_tag_reason(".") == "a tag must not start or end with '.'");
  CHECK(invalid_tag_reason("..") == "a tag must not start or end with '.'");
  for (std::string dev : {"CON", "con", "Prn", "aux", "NUL", "com1", "COM9", "lpt1", "LpT9",
                          "nul.tar.gz", "aux.x", "CON.txt"})
    CHECK_MESSAGE(invalid_tag_reason(dev) == "'" + dev + "' is a reserved device name on Windows",
                  dev);
}

TEST_CASE("check_tag throws invalid_argument naming the tag") {
  check_tag("ok");
  REQUIRE_ERROR_AS(err, check_tag("bad tag"), ErrorCode::invalid_argument, "' ' at position 3");
  CHECK(err.context().tag == "bad tag");
}

TEST_CASE("Tags compare without regard to ASCII case only") {
  CHECK(ascii_lower("Step-1.ABC") == "step-1.abc");
  CHECK(ascii_lower("\xC3\x89") == "\xC3\x89");  // non-ASCII bytes untouched
  CHECK(same_tag("Step-1", "STEP-1"));
  CHECK(same_tag("abc", "abc"));
  CHECK_FALSE(same_tag("abc", "abd"));
  CHECK_FALSE(same_tag("abc", "abcd"));
  CHECK_FALSE(same_tag("@", "`"));  // 0x40 and 0x60 differ by the case bit, but are not letters
  CHECK_FALSE(same_tag("[", "{"));
}

// ---- tags.txt ----------------------------------------------------------------

TEST_CASE("tags.txt: parse and write") {
  CHECK(parse_tags_file("", {}).empty());
  CHECK(parse_tags_file("v1\nv2\nStep-3\n", {}) == Strings{"v1", "v2", "Step-3"});
  CHECK(parse_tags_file("v1\nv2", {}) == Strings{"v1", "v2"});
  CHECK(write_tags_file({"v1", "v2"}) == "v1\nv2\n");
  CHECK(write_tags_file({}).empty());
  Strings many;
  for (int i = 0; i < 500; ++i) many.push_back("t" + std::to_string(i));
  CHECK(parse_tags_file(write_tags_file(many), {}) == many);
}

TEST_CASE("tags.txt: duplicates in any letter case are rejected with both lines") {
  struct Case {
    std::string text, shown;
    std::uint64_t line;
  };
  for (const auto& c : {Case{"step\nstep\n", "step", 2}, Case{"Step-1\nx\nSTEP-1\n", "STEP-1", 3},
                        Case{"abc\naBc", "aBc", 2}, Case{"A.b@c\na.B@C\n", "a.B@C", 2}}) {
    REQUIRE_ERROR_AS(err, parse_tags_file(c.text, {}), ErrorCode::corrupt,
                     "tag '" + c.shown + "' repeats the tag of line 1");
    CHECK(err.context().line == c.line);
  }
}

TEST_CASE("tags.txt: invalid tags, empty lines and bad bytes give the line") {
  REQUIRE_ERROR_AS(e1, parse_tags_file("v1\n\nv2\n", {}), ErrorCode::corrupt,
                   "a tag must not be empty");
  CHECK(e1.context().line == 2u);
  CHECK_ERROR(parse_tags_file("v1\n\n", {}), ErrorCode::corrupt, "must not be empty");
  REQUIRE_ERROR_AS(e2, parse_tags_file("v1\nv2\n../x\n", {}), ErrorCode::corrupt,
                   "'/' at position 2");
  CHECK(e2.context().line == 3u);
  CHECK_ERROR(parse_tags_file("v1\r\nv2\r\n", {}), ErrorCode::corrupt, "carriage return");
  CHECK_ERROR(parse_tags_file("v1 \n", {}), ErrorCode::corrupt, "' ' at position 2");
  CHECK_ERROR(parse_tags_file("LPT3\n", {}), ErrorCode::corrupt, "reserved device name");
}

TEST_CASE("A byte-order mark is refused in every text entry, at line 1 (FORMAT.md section 4)") {
  const std::string bom = "\xEF\xBB\xBF";
  const std::string message = "starts with a UTF-8 byte-order mark (EF BB BF)";
  REQUIRE_ERROR_AS(tags, parse_tags_file(bom + "v1\n", {}), ErrorCode::corrupt, message);
  CHECK(tags.context().line == 1u);
  REQUIRE_ERROR_AS(params, parse_blob_table(bom + "w 0\n", TableKind::params, {}),
                   ErrorCode::corrupt, message);
  CHECK(params.context().line == 1u);
  REQUIRE_ERROR_AS(updater, parse_blob_table(bom + "w M 0\n", TableKind::updater, {}),
                   ErrorCode::corrupt, message);
  CHECK(updater.context().line == 1u);
  REQUIRE_ERROR_AS(toml, parse_metadata(bom + "format_version = 1\n", {}), ErrorCode::corrupt,
                   message);
  CHECK(toml.context().line == 1u);
  // The same bytes elsewhere are ordinary UTF-8 (U+FEFF inside a name).
  CHECK(parse_blob_table("a" + bom + " 0\n", TableKind::params, {})[0].keys[0] == "a" + bom);
  CHECK(parse_metadata("format_version = 1\nwriter = \"" + bom + "x\"\n", {}).writer == bom + "x");
}

// ---- name escaping -------------------------------------------------------------

TEST_CASE("escape_name: the examples of FORMAT.md") {
  CHECK(escape_name("encoder/layer 1#w%") == "encoder/layer%201%23w%25");
  CHECK(escape_name("a\nb") == "a%0Ab");
  CHECK(escape_name("plain.name/with/slashes") == "plain.name/with/slashes");
  CHECK(escape_name("\xC3\xA9t\xC3\xA9") == "\xC3\xA9t\xC3\xA9");  // UTF-8 stays readable
  CHECK(escape_name(std::string("\0\x7F\t\r", 4)) == "%00%7F%09%0D");
  CHECK(escape_name(" ") == "%20");
  // A leading U+FEFF would start the file with a byte-order mark when its
  // row comes first: its bytes are escaped; elsewhere it stays.
  CHECK(escape_name("\xEF\xBB\xBFw") == "%EF%BB%BFw");
  CHECK(escape_name("w\xEF\xBB\xBF") == "w\xEF\xBB\xBF");
  CHECK(escape_name("\xEF\xBC\xA1") == "\xEF\xBC\xA1");  // U+FF21: not a BOM
}

TEST_CASE("A table whose first name starts with U+FEFF reads back (fuzz finding)") {
  // Accepted after a comment line; written first, it must not become a
  // byte-order mark at the start of the file.
  const std::string text = "# comment\n\xEF\xBB\xBFlay0Aname base/12\n";
  const auto rows = parse_blob_table(text, TableKind::params, {});
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].keys[0] == "\xEF\xBB\xBFlay0Aname");
  const std::string written = write_blob_table(rows, TableKind::params);
  CHECK(written == "%EF%BB%BFlay0Aname base/12\n");
  const auto again = parse_blob_table(written, TableKind::params, {});
  REQUIRE(again.size() == 1);
  CHECK(again[0].keys == rows[0].keys);
}

TEST_CASE("escape_name / unescape_name: every ASCII byte, by the rule") {
  for (int c = 0; c < 0x80; ++c) {
    std::string name(1, static_cast<char>(c));
    const bool escaped = c <= 0x20 || c == 0x7F || c == '%' || c == '#';
    static const char* hex = "0123456789ABCDEF";
    std::string expected = escaped ? std::string{'%', hex[c >> 4], hex[c & 15]} : name;
    INFO("byte " << c);
    CHECK(escape_name(name) == expected);
    CHECK(unescape_name(expected) == name);
    // Surrounded by other text, too.
    CHECK(unescape_name(escape_name("x" + name + "y")) == "x" + name + "y");
    // An unescaped byte that needs escaping is rejected.
    if (escaped && c != '%')
      CHECK_ERROR(unescape_name("a" + name), ErrorCode::corrupt,
                  "unescaped byte " + std::to_string(c) + " at column 2");
  }
}

TEST_CASE("escape_name / unescape_name: round trip of every Unicode scalar value") {
  // 64 code points per name; every byte sequence of valid UTF-8 occurs.
  std::string name;
  std::size_t names = 0;
  auto flush = [&] {
    std::string esc = escape_name(name);
    CHECK(esc.find(' ') == std::string::npos);
    CHECK(esc.find('\n') == std::string::npos);
    REQUIRE(unescape_name(esc) == name);
    name.clear();
    ++names;
  };
  for (char32_t cp = 1; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    detail::utf8_append(name, cp);
    if (cp % 64 == 0) flush();
  }
  flush();
  CHECK(names > 17000);
  CHECK(unescape_name(escape_name(std::string(1, '\0'))) == std::string(1, '\0'));
}

TEST_CASE("unescape_name: lower-case hex, redundant escapes") {
  CHECK(unescape_name("a%0ab") == "a\nb");
  CHECK(unescape_name("%41%62") == "Ab");  // escaping a byte that needs none is accepted
  CHECK(unescape_name("%C3%A9") == "\xC3\xA9");
  CHECK(unescape_name("%c3%a9") == "\xC3\xA9");
}

TEST_CASE("unescape_name: malformed escapes, empty names, invalid UTF-8") {
  CHECK_ERROR(unescape_name("%"), ErrorCode::corrupt, "malformed escape '%' at column 1");
  CHECK_ERROR(unescape_name("ab%4"), ErrorCode::corrupt, "malformed escape '%4' at column 3");
  CHECK_ERROR(unescape_name("%G1"), ErrorCode::corrupt, "malformed escape '%G1' at column 1");
  CHECK_ERROR(unescape_name("%1G"), ErrorCode::corrupt, "malformed escape '%1G'");
  CHECK_ERROR(unescape_name("x%%41"), ErrorCode::corrupt, "malformed escape '%%4' at column 2");
  CHECK_ERROR(unescape_name("% 1"), ErrorCode::corrupt, "malformed escape");
  CHECK_ERROR(unescape_name(""), ErrorCode::corrupt, "empty name");
  CHECK_ERROR(unescape_name("%FF"), ErrorCode::corrupt,
              "not valid UTF-8 after unescaping (byte 0)");
  CHECK_ERROR(unescape_name("a%C3"), ErrorCode::corrupt,
              "not valid UTF-8 after unescaping (byte 1)");
  CHECK_ERROR(unescape_name("\xFF"), ErrorCode::corrupt, "not valid UTF-8");
  CHECK_ERROR(unescape_name("%ED%A0%80"), ErrorCode::corrupt, "not valid UTF-8");  // surrogate
  CHECK_ERROR(unescape_name("a#b"), ErrorCode::corrupt, "unescaped byte 35 at column 2");
}

// ---- blob references -------------------------------------------------------------

TEST_CASE("Blob references: the grammar [TAG/]N[.fifu]") {
  CHECK(parse_blob_ref("0", TableKind::params) == BlobRef{"", 0, BlobFormat::tensor});
  CHECK(parse_blob_ref("17", TableKind::updater) == BlobRef{"", 17, BlobFormat::tensor});
  CHECK(parse_blob_ref("v1/3", TableKind::params) == BlobRef{"v1", 3, BlobFormat::tensor});
  CHECK(parse_blob_ref("4.fifu", TableKind::params) == BlobRef{"", 4, BlobFormat::fifu});
  CHECK(parse_blob_ref("Step-2/4.fifu", TableKind::params) ==
        BlobRef{"Step-2", 4, BlobFormat::fifu});
  CHECK(parse_blob_ref("999999999999999", TableKind::params).index == 999999999999999ull);
  for (std::string bad : {"",
                          "01",
                          "00",
                          "-1",
                          "+1",
                          "1a",
                          " 1",
                          "1 ",
                          "1.fb",
                          "0x10",
                          "1234567890123456",
                          ".fifu",
                          "1.fifu.fifu",
                          "a/b/1",
                          "/1",
                          "v1/",
                          "CON/1",
                          "../1",
                          "v1//1",
                          "\xC3\xA9/1",
                          "1.FIFU",
                          "v1/01"}) {
    INFO("reference '" << bad << "'");
    CHECK_ERROR(parse_blob_ref(bad, TableKind::params), ErrorCode::corrupt, "blob reference '");
  }
  CHECK_ERROR(parse_blob_ref("3.fifu", TableKind::updater), ErrorCode::corrupt,
              ".fifu blobs belong in params.txt");
}

TEST_CASE("Blob references: text and entry names") {
  for (const BlobRef& ref :
       {BlobRef{"", 0, BlobFormat::tensor}, BlobRef{"v1", 12, BlobFormat::tensor},
        BlobRef{"", 5, BlobFormat::fifu}, BlobRef{"x.y", 7, BlobFormat::fifu}})
    CHECK(parse_blob_ref(blob_ref_text(ref), TableKind::params) == ref);
  CHECK(blob_ref_text({"v1", 12, BlobFormat::tensor}) == "v1/12");
  CHECK(blob_ref_text({"", 5, BlobFormat::fifu}) == "5.fifu");
  CHECK(blob_entry_name({"", 3, BlobFormat::tensor}, "v2", TableKind::params) == "v2/params/3.fb");
  CHECK(blob_entry_name({"v0", 2, BlobFormat::fifu}, "v2", TableKind::params) ==
        "v0/params/2.fifu");
  CHECK(blob_entry_name({"", 3, BlobFormat::tensor}, "v2", TableKind::updater) ==
        "v2/updater/3.fb");
  CHECK(table_entry_name(TableKind::params) == "params.txt");
  CHECK(table_entry_name(TableKind::updater) == "updater.txt");
  CHECK(table_folder(TableKind::updater) == "updater");
}

// ---- params.txt / updater.txt -------------------------------------------------------

TEST_CASE("params.txt: rows, comments, escaped names, line numbers") {
  auto rows = parse_blob_table(
      "w 0\nencoder/layer%201%23w%25 v1/2\n# a comment\n#x y z\nemb 3.fifu\nline%0Abreak 4",
      TableKind::params, {});
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].keys == Strings{"w"});
  CHECK(rows[0].ref == BlobRef{"", 0, BlobFormat::tensor});
  CHECK(rows[0].line == 1);
  CHECK(rows[1].keys == Strings{"encoder/layer 1#w%"});
  CHECK(rows[1].ref == BlobRef{"v1", 2, BlobFormat::tensor});
  CHECK(rows[2].keys == Strings{"emb"});
  CHECK(rows[2].ref.format == BlobFormat::fifu);
  CHECK(rows[2].line == 5);
  CHECK(rows[3].keys == Strings{"line\nbreak"});
  CHECK(rows[3].line == 6);
  CHECK(parse_blob_table("", TableKind::params, {}).empty());
  CHECK(parse_blob_table("# only a comment\n", TableKind::params, {}).empty());
}

TEST_CASE("updater.txt: variable, state, blob") {
  auto rows = parse_blob_table("w M 0\nw V 1\nb%20ias M v0/7\n", TableKind::updater, {});
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].keys == Strings{"w", "M"});
  CHECK(rows[1].keys == Strings{"w", "V"});
  CHECK(rows[2].keys == Strings{"b ias", "M"});
  CHECK(rows[2].ref == BlobRef{"v0", 7, BlobFormat::tensor});
}

TEST_CASE("Blob tables: malformed lines name the line") {
  struct Case {
    std::string text;
    TableKind kind;
    std::uint64_t line;
    std::string message;
  };
  const Case cases[] = {
      {"w 0\nw\n", TableKind::params, 2, "expected 2 fields separated by single spaces, found 1"},
      {"w 0 1\n", TableKind::params, 1, "expected 2 fields separated by single spaces, found 3"},
      {"w  0\n", TableKind::params, 1, "found 3"},
      {"w 0 \n", TableKind::params, 1, "found 3"},
      {"w 0\n\n", TableKind::params, 2, "found 1"},
      {" w 0\n", TableKind::params, 1, "found 3"},
      {"w 0\nv 1\n %23x 2\n", TableKind::params, 3, "found 3"},
      {"w M 0\nw 1\n", TableKind::updater, 2, "expected 3 fields"},
      {"w 0\nx%G0 1\n", TableKind::params, 2, "malformed escape '%G0' at column 2"},
      {"x% 1\n", TableKind::params, 1, "malformed escape '%' at column 2"},
      {"x%4 1\n", TableKind::params, 1, "malformed escape '%4' at column 2"},
      {"%FF 1\n", TableKind::params, 1, "not valid UTF-8 after unescaping"},
      {"w 01\n", TableKind::params, 1, "blob reference '01'"},
      {"w x/y/1\n", TableKind::params, 1, "blob reference 'x/y/1'"},
      {"w M 1.fifu\n", TableKind::updater, 1, ".fifu blobs belong in params.txt"},
      {"w 0\nw 1\n", TableKind::params, 2, "'w' is listed already on line 1"},
      {"a%41 0\naA 1\n", TableKind::params, 2, "'aA' is listed already on line 1"},
      {"w M 0\nw V 1\nw M 2\n", TableKind::updater, 3, "'w M' is listed already on line 1"},
      {"w 0\r\n", TableKind::params, 1, "carriage return"},
      {"ok 0\nw\xC3 0\n", TableKind::params, 2, "invalid UTF-8 at column 2"},
  };
  for (const auto& c : cases) {
    INFO("table: " << c.text);
    REQUIRE_ERROR_AS(err, parse_blob_table(c.text, c.kind, {}), ErrorCode::corrupt, c.message);
    CHECK(err.context().line == c.line);
  }
}

TEST_CASE("Blob tables: write then parse gives the rows back") {
  std::vector<BlobRow> rows;
  std::uint64_t i = 0;
  for (std::string name :
       {std::string("w"), std::string("encoder/layer 1#w%"), std::string("a\nb"),
        std::string(" lead"), std::string("trail "), std::string("100%"), std::string("#hash"),
        std::string("\xF0\x9F\x98\x80"), std::string("tab\there"), std::string("nul\0x", 5)}) {
    BlobRow r;
    r.keys = {name};
    r.ref = BlobRef{i % 3 == 0 ? "v0" : "", i, i % 4 == 1 ? BlobFormat::fifu : BlobFormat::tensor};
    rows.push_back(r);
    ++i;
  }
  std::string text = write_blob_table(rows, TableKind::params);
  auto back = parse_blob_table(text, TableKind::params, {});
  REQUIRE(back.size() == rows.size());
  for (std::size_t k = 0; k < rows.size(); ++k) {
    CHECK(back[k].keys == rows[k].keys);
    CHECK(back[k].ref == rows[k].ref);
    CHECK(back[k].line == k + 1);
  }
  // A comment-looking name is escaped, so it is never read as a comment.
  CHECK(text.find("\n#") == std::string::npos);

  std::vector<BlobRow> up;
  for (auto [v, s] : {std::pair<std::string, std::string>{"w", "M"}, {"w", "V"}, {"a b", "m v"}}) {
    BlobRow r;
    r.keys = {v, s};
    r.ref = BlobRef{"", up.size(), BlobFormat::tensor};
    up.push_back(r);
  }
  std::string utext = write_blob_table(up, TableKind::updater);
  CHECK(utext == "w M 0\nw V 1\na%20b m%20v 2\n");
  auto uback = parse_blob_table(utext, TableKind::updater, {});
  REQUIRE(uback.size() == 3);
  CHECK(uback[2].keys == Strings{"a b", "m v"});
}

TEST_CASE("Blob tables: the index of rows by key; repeated keys among many rows") {
  std::string params, updater;
  const int n = 70000;  // past the initial reservation: the index grows
  for (int i = 0; i < n; ++i) {
    params += "p" + std::to_string(i) + " " + std::to_string(i) + "\n";
    updater += "v" + std::to_string(i / 2) + (i % 2 ? " M " : " V ") + std::to_string(i) + "\n";
  }
  detail::PositionIndex index;
  auto rows = parse_blob_table(params, TableKind::params, {}, &index);
  REQUIRE(rows.size() == static_cast<std::size_t>(n));
  CHECK(index.size() == rows.size());
  auto find = [&](const std::vector<BlobRow>& r, TableKind kind, std::string_view a,
                  std::string_view b = {}) {
    return index.find(row_key_hash(kind, a, b),
                      [&](std::size_t p) { return row_has_keys(r[p], kind, a, b); });
  };
  CHECK(find(rows, TableKind::params, "p0") == 0);
  CHECK(find(rows, TableKind::params, "p69999") == 69999);
  CHECK(find(rows, TableKind::params, "p70000") == detail::PositionIndex::npos);
  CHECK(find(rows, TableKind::params, "P1") == detail::PositionIndex::npos);

  rows = parse_blob_table(updater, TableKind::updater, {}, &index);
  REQUIRE(rows.size() == static_cast<std::size_t>(n));
  CHECK(find(rows, TableKind::updater, "v7", "M") == 15);
  CHECK(find(rows, TableKind::updater, "v7", "V") == 14);
  CHECK(find(rows, TableKind::updater, "v7", "W") == detail::PositionIndex::npos);
  CHECK(find(rows, TableKind::updater, "v7M", "") == detail::PositionIndex::npos);

  REQUIRE_ERROR_AS(err, parse_blob_table(params + "p123 5\n", TableKind::params, {}),
                   ErrorCode::corrupt, "'p123' is listed already on line 124");
  CHECK(err.context().line == static_cast<std::uint64_t>(n + 1));
  CHECK_ERROR(parse_blob_table(updater + "v9 M 3\n", TableKind::updater, {}), ErrorCode::corrupt,
              "'v9 M' is listed already on line 20");
}
