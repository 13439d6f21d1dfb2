// Truncation at every structural boundary: of a zip written by modelzip's
// own writer (tests/golden/core/v1.zip), of hand-built archives with and
// without ZIP64 end records, of a tensor blob, and of a real finalfusion
// file. The boundaries are found by walking the structures here, from the
// specifications (APPNOTE 6.3, FORMAT.md §6, the finalfusion chunk format),
// not by asking modelzip.
#include <doctest/doctest.h>

#include <cstring>
#include <set>
#include <string>

#include "../zip/expect_error.hpp"
#include "hostile_archives.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/finalfusion/embeddings.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

std::uint64_t le(const std::string& s, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s.at(at + i));
  return v;
}

// Every offset where a zip structure or one of its variable parts begins or
// ends: local header, name, extra, data; central records with name, extra,
// comment; ZIP64 end record and locator; end record. Walks the local headers
// from offset 0 (the archive has no data descriptors) and the central
// directory from the end record.
std::set<std::uint64_t> zip_boundaries(const std::string& z) {
  std::set<std::uint64_t> b;
  const std::uint64_t eocd = z.rfind(std::string("PK\x05\x06", 4));
  REQUIRE(eocd != std::string::npos);
  b.insert(eocd);
  b.insert(eocd + 22);
  std::uint64_t cd = le(z, eocd + 16, 4);
  if (cd == 0xFFFFFFFF) {
    const std::uint64_t locator = eocd - 20;
    REQUIRE(le(z, locator, 4) == 0x07064b50);
    const std::uint64_t record = le(z, locator + 8, 8);
    b.insert(locator);
    b.insert(record);
    b.insert(record + 56);
    cd = le(z, record + 48, 8);
  }
  for (std::uint64_t at = 0; le(z, at, 4) == 0x04034b50;) {
    const std::uint64_t name = at + 30, extra = name + le(z, at + 26, 2);
    const std::uint64_t data = extra + le(z, at + 28, 2);
    std::uint64_t size = le(z, at + 18, 4);
    if (size == 0xFFFFFFFF) size = le(z, extra + 4 + 8, 8);  // ZIP64 extra: usize, csize
    b.insert({at, at + 4, name, extra, data, data + size});
    at = data + size;
  }
  for (std::uint64_t at = cd; le(z, at, 4) == 0x02014b50;) {
    const std::uint64_t name = at + 46, extra = name + le(z, at + 28, 2);
    const std::uint64_t comment = extra + le(z, at + 30, 2);
    const std::uint64_t end = comment + le(z, at + 32, 2);
    b.insert({at, name, extra, comment, end});
    at = end;
  }
  return b;
}

void every_prefix_fails(const std::string& z, const std::string& what) {
  const auto boundaries = zip_boundaries(z);
  REQUIRE(boundaries.size() > 10);
  for (std::uint64_t cut : boundaries) {
    if (cut >= z.size()) continue;
    for (std::uint64_t at : {cut, cut + 1}) {
      if (at >= z.size()) continue;
      CAPTURE(what);
      CAPTURE(at);
      CHECK_ERROR(Archive::from_memory(Bytes::copy_of(z.substr(0, at)), "t.zip"),
                  ErrorCode::corrupt,
                  at == 0 ? "the file is empty (0 bytes)" : "end-of-central-directory");
    }
  }
}

}  // namespace

TEST_SUITE("hostile") {
  TEST_CASE("A real archive truncated at every structural boundary is refused") {
    const std::string golden = io_bytes(tests_dir() / "golden" / "core" / "v1.zip");
    REQUIRE(golden.size() > 1000);
    // The untruncated file is valid: the refusals below are the cuts' doing.
    CHECK(Archive::from_memory(Bytes::copy_of(golden), "v1.zip").tags().size() == 2);
    every_prefix_fails(golden, "v1.zip");
  }

  TEST_CASE("Archives with ZIP64 end records truncated at every boundary are refused") {
    ZipSpec spec = minimal_archive();
    spec.zip64_end = true;
    spec.entries[3].zip64 = true;  // the blob's sizes in a ZIP64 extra field
    const std::string z = build_zip(spec).bytes;
    CHECK(Archive::from_memory(Bytes::copy_of(z), "t.zip").tags().size() == 1);
    every_prefix_fails(z, "zip64");
  }

  TEST_CASE("Entries cut at every boundary under intact end records are refused") {
    // The entry area is cut at a boundary and the (now stale) central
    // directory and end records follow: every offset they hold is wrong.
    for (bool zip64 : {false, true}) {
      ZipSpec spec = minimal_archive();
      spec.zip64_end = zip64;
      BuiltZip built = build_zip(spec);
      const std::string tail = built.bytes.substr(built.cd_offset);
      for (std::uint64_t cut : zip_boundaries(built.bytes)) {
        if (cut >= built.cd_offset) continue;
        CAPTURE(zip64);
        CAPTURE(cut);
        CHECK_ERROR(
            Archive::from_memory(Bytes::copy_of(built.bytes.substr(0, cut) + tail), "t.zip"),
            ErrorCode::corrupt, "");
      }
    }
  }

  TEST_CASE("A tensor blob truncated at every structural boundary is refused, naming it") {
    const std::string blob = good_blob();
    // Boundaries (FORMAT.md §6): inside and after the size prefix, the file
    // identifier (bytes 8..12), the end of the FlatBuffer (4 + S), the start
    // of the values segment (64-aligned), inside it.
    const std::uint64_t header_end = 4 + le(blob, 0, 4);
    const std::uint64_t data = round_up_64(header_end);
    REQUIRE(blob.size() == data + 8);
    for (std::uint64_t cut : std::initializer_list<std::uint64_t>{
             0, 1, 3, 4, 8, 12, header_end - 1, header_end, data - 1, data, data + 4, data + 7}) {
      CAPTURE(cut);
      ZipSpec spec = minimal_archive();
      set_entry(spec, "t1/params/0.fb", blob.substr(0, cut));
      Archive a = Archive::from_memory(Bytes::copy_of(build_zip(spec).bytes), "t.zip");
      REQUIRE_ERROR_AS(e, a.load("t1"), ErrorCode::corrupt, "");
      CHECK(e.context().entry == "t1/params/0.fb");
      CHECK(e.context().tag == "t1");
      REQUIRE_ERROR_AS(e2, a.params("t1"), ErrorCode::corrupt, "");
      CHECK(e2.context().entry == "t1/params/0.fb");
    }
  }

  TEST_CASE("A real finalfusion file truncated at every byte is refused") {
    const std::string file = io_bytes(shared_testdata() / "finalfusion" / "embeddings.fifu");
    REQUIRE(file.size() > 100);
    REQUIRE(file.substr(0, 4) == "FiFu");
    // The chunks the header lists: "FiFu", version, count, ids; then chunks
    // of id u32, length u64, body. A prefix is complete only once every
    // listed chunk is there.
    const std::uint64_t count = le(file, 8, 4);
    std::uint64_t at = 12 + 4 * count;
    for (std::uint64_t i = 0; i < count; ++i) at += 12 + le(file, at + 4, 8);
    REQUIRE(at <= file.size());
    CHECK_NOTHROW(finalfusion::Embeddings::read(Bytes::copy_of(file)));
    for (std::uint64_t cut = 0; cut < at; ++cut) {
      CAPTURE(cut);
      CHECK_ERROR(finalfusion::Embeddings::read(Bytes::copy_of(file.substr(0, cut))),
                  ErrorCode::corrupt, "");
    }
  }
}
