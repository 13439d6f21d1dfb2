// Archive::verify (src/checkpoint/verify.cpp): every problem of a damaged
// params.txt or updater.txt, the cap per entry, and problems_found.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "../hostile/hostile_archives.hpp"
#include "modelzip/archive.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

std::vector<Problem> verify_zip(const ZipSpec& spec) {
  return Archive::from_memory(Bytes::copy_of(build_zip(spec).bytes), "v.zip").verify();
}

std::vector<std::string> texts(const std::vector<Problem>& problems) {
  std::vector<std::string> out;
  for (const auto& p : problems) out.push_back(p.entry + ": " + p.message);
  return out;
}

}  // namespace

TEST_CASE("verify reports every bad line of a damaged params.txt and updater.txt") {
  ZipSpec spec = tagged_archive({"t1", "t2"});
  set_entry(spec, "t2/params.txt",
            "w 0\n"
            "two fields here\n"  // 3 fields
            "w 0\n"              // repeats line 1
            "bad\xff name 0\n"   // not UTF-8
            "gone 7\n"           // no blob entry t2/params/7.fb
            "elsewhere t9/0\n"   // a tag tags.txt does not list
            "T1 T1/0\n"          // a tag spelled in another case
            "x 0 # comment\n"    // 4 fields
            "# a comment line\n"
            "shared t1/0\n");  // fine
  set_entry(spec, "t2/updater.txt", "w m 0\nw v\nw v 3\n");
  // Per table, the lines that do not parse, then the rows whose reference
  // leads nowhere (each in line order).
  const std::vector<std::string> expected = {
      "t2/params.txt: line 2: expected 2 fields separated by single spaces, found 3",
      "t2/params.txt: line 3: 'w' is listed already on line 1",
      "t2/params.txt: line 4: invalid UTF-8 at column 4",
      "t2/params.txt: line 8: expected 2 fields separated by single spaces, found 4",
      "t2/params.txt: line 5: blob entry 't2/params/7.fb' does not exist",
      "t2/params.txt: line 6: reference to tag 't9', which tags.txt does not list",
      "t2/params.txt: line 7: reference 'T1/0' differs in case from the tag's spelling",
      // updater.txt is checked too, though params.txt is damaged.
      "t2/updater.txt: line 2: expected 3 fields separated by single spaces, found 2",
      "t2/updater.txt: line 1: blob entry 't2/updater/0.fb' does not exist",
      "t2/updater.txt: line 3: blob entry 't2/updater/3.fb' does not exist",
  };
  const std::vector<Problem> got = verify_zip(spec);
  CHECK(texts(got) == expected);
  CHECK(problems_found(got) == expected.size());
  // Opening keeps the first problem as the tag's damage; the other tag reads.
  Archive a = Archive::from_memory(Bytes::copy_of(build_zip(spec).bytes), "v.zip");
  REQUIRE(a.tag_damage("t2"));
  CHECK(a.tag_damage("t2")->context().line == 2);
  CHECK_FALSE(a.tag_damage("t1"));
}

TEST_CASE("verify reports a table it cannot read at all once, and the other table of the tag") {
  ZipSpec spec = minimal_archive();
  set_entry(spec, "t1/params.txt", "\xEF\xBB\xBFw 0\nv\n");  // a byte-order mark: the whole text
  set_entry(spec, "t1/updater.txt", "w m\n");
  CHECK(texts(verify_zip(spec)) ==
        std::vector<std::string>{
            "t1/params.txt: line 1: starts with a UTF-8 byte-order mark (EF BB BF), which the "
            "format does not allow",
            "t1/updater.txt: line 1: expected 3 fields separated by single spaces, found 2"});
}

TEST_CASE("verify reports a table whose CRC-32 does not match once, then the other problems") {
  // t1/params.txt "w 0" stored as "W 0": its data no longer match its CRC;
  // so do t1/params/0.fb's (read by the entry checks alone).
  ZipSpec spec = minimal_archive();
  entry(spec, "t1/params.txt").raw_data = "W 0\n";
  std::string blob = entry(spec, "t1/params/0.fb").content;
  blob.back() ^= 0x01;
  entry(spec, "t1/params/0.fb").raw_data = blob;
  const std::vector<Problem> got = verify_zip(spec);
  CHECK(texts(got) ==
        std::vector<std::string>{"t1/params.txt: CRC-32 mismatch: the entry data is damaged",
                                 "t1/params/0.fb: CRC-32 mismatch: the entry data is damaged"});
  CHECK(problems_found(got) == 2);
}

TEST_CASE("verify lists 20 bad lines of a table, counts the others, and problems_found adds them") {
  ZipSpec spec = minimal_archive();
  std::string table = "w 0\n";
  for (int i = 0; i < 100000; ++i) table += "bad line " + std::to_string(i) + "\n";
  set_entry(spec, "t1/params.txt", table);
  const std::vector<Problem> got = verify_zip(spec);
  REQUIRE(got.size() == 21);
  for (std::size_t i = 0; i < 20; ++i) {
    INFO(i);
    CHECK(got[i].entry == "t1/params.txt");
    CHECK(got[i].message == "line " + std::to_string(i + 2) +
                                ": expected 2 fields separated by single spaces, found 3");
  }
  CHECK(got[20].entry == "t1/params.txt");
  CHECK(got[20].message == "... and 99980 more problems in this entry");
  CHECK(problems_found(got) == 100000);
}

TEST_CASE("problems_found counts each listed problem once and each '... and N more' as N") {
  CHECK(problems_found({}) == 0);
  const std::vector<Problem> problems = {
      {"a", "line 1: bad"},
      {"a", "... and 1 more problem in this entry"},
      {"b", "... and 7 more problems in this entry"},
      // Not the count's wording: problems of their own.
      {"c", "... and 7 more problem in this entry"},
      {"c", "... and x more problems in this entry"},
      {"c", "... and 7 more problems"},
  };
  CHECK(problems_found(problems) == 1 + 1 + 7 + 3);
}
