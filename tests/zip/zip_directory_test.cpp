// zip::parse_directory against hand-built archives: the accepted variants
// (ZIP64 records, data descriptors, comments, EOCD signatures inside
// comments) and every rejection rule of zip_directory.hpp, each with an
// Error that names the entry.
#include <doctest/doctest.h>

#include "expect_error.hpp"
#include "modelzip/error.hpp"
#include "zip/zip_directory.hpp"
#include "zip_builder.hpp"

using namespace modelzip;
using namespace modelzip::testing;
using modelzip::zip::parse_directory;

namespace {

zip::Directory parse(const std::string& bytes, const Limits& limits = {}) {
  return parse_directory(span_of(bytes), limits);
}

ZipSpec two_entries() {
  ZipSpec s;
  s.entries.push_back(stored("a.txt", "hello"));
  s.entries.push_back(deflated("dir/b.bin", std::string(1000, 'x')));
  return s;
}

// An entry whose (stored) content is itself a local header + data of an
// entry named `inner_name`: a second central record can point inside it.
std::string embedded_local_entry(const std::string& inner_name, const std::string& inner_data) {
  ZipSpec inner;
  inner.entries.push_back(stored(inner_name, inner_data));
  BuiltZip b = build_zip(inner);
  return b.bytes.substr(0, b.cd_offset);
}

}  // namespace

TEST_CASE("A plain archive: entries, methods, sizes, CRCs and data offsets") {
  ZipSpec spec = two_entries();
  BuiltZip z = build_zip(spec);
  zip::Directory d = parse(z.bytes);
  REQUIRE(d.entries.size() == 2);
  CHECK(d.central_directory_offset == z.cd_offset);
  CHECK(d.central_directory_size == z.cd_size);
  CHECK(d.end_of_archive == z.bytes.size());
  const auto& a = d.entries[0];
  CHECK(a.name == "a.txt");
  CHECK(a.stored());
  CHECK(a.compressed_size == 5);
  CHECK(a.uncompressed_size == 5);
  CHECK(a.crc32 == 0x3610A686u);  // CRC-32 of "hello" (zlib's check value)
  CHECK(a.local_header_offset == 0);
  CHECK(a.data_offset == 30 + 5);
  CHECK(z.bytes.substr(a.data_offset, 5) == "hello");
  const auto& b = d.entries[1];
  CHECK(b.name == "dir/b.bin");
  CHECK(b.method == zip::kMethodDeflate);
  CHECK(b.uncompressed_size == 1000);
  CHECK(b.compressed_size == deflate_raw(std::string(1000, 'x')).size());
  CHECK(b.local_header_offset == 40);  // 30 + name 5 + data 5
  CHECK(b.data_offset == 40 + 30 + 9);
  CHECK(b.flags == 0x0800);
}

TEST_CASE("Padding fields (0x7A6D) are ignored whatever their bytes and lengths") {
  // FORMAT.md section 1: readers ignore the contents of 0x7A6D fields, local
  // and central, as every extra field they do not use.
  ZipSpec spec = two_entries();
  std::string local;
  put16(local, 0x7A6D);
  put16(local, 7);
  local += "garbage";  // not zeros; not the length alignment would need
  std::string central;
  put16(central, 0x7A6D);
  put16(central, 2);
  central += "zz";  // not the local field's length either
  spec.entries[0].local_extra = local;
  spec.entries[0].central_extra = central;
  spec.entries[1].local_extra = local;  // on a deflated entry too
  BuiltZip z = build_zip(spec);
  zip::Directory d = parse(z.bytes);
  REQUIRE(d.entries.size() == 2);
  CHECK(d.entries[0].data_offset == 30 + 5 + local.size());
  CHECK(z.bytes.substr(d.entries[0].data_offset, 5) == "hello");
  CHECK(d.entries[1].data_offset == d.entries[1].local_header_offset + 30 + 9 + local.size());
}

TEST_CASE("An archive without entries") {
  BuiltZip z = build_zip(ZipSpec{});
  CHECK(z.bytes.size() == 22);
  zip::Directory d = parse(z.bytes);
  CHECK(d.entries.empty());
  CHECK(d.central_directory_offset == 0);
}

TEST_CASE("A prefix before the first entry (self-extractor stub) is allowed") {
  ZipSpec spec = two_entries();
  spec.prefix = std::string(100, '#');
  BuiltZip z = build_zip(spec);
  zip::Directory d = parse(z.bytes);
  REQUIRE(d.entries.size() == 2);
  CHECK(d.entries[0].local_header_offset == 100);
  CHECK(z.bytes.substr(d.entries[0].data_offset, 5) == "hello");
}

TEST_CASE("Comments: archive comment, entry comments, EOCD signatures inside comments") {
  SUBCASE("archive and entry comments") {
    ZipSpec spec = two_entries();
    spec.comment = "an archive comment";
    spec.entries[0].comment = "an entry comment";
    BuiltZip z = build_zip(spec);
    zip::Directory d = parse(z.bytes);
    REQUIRE(d.entries.size() == 2);
    CHECK(d.entries[1].name == "dir/b.bin");
    CHECK(d.end_of_archive == z.bytes.size());
    CHECK(d.comment == "an archive comment");
  }
  SUBCASE("the longest comment (65535 bytes)") {
    ZipSpec spec = two_entries();
    spec.comment = std::string(65535, 'c');
    BuiltZip z = build_zip(spec);
    CHECK(parse(z.bytes).entries.size() == 2);
  }
  SUBCASE("an EOCD signature in the middle of the comment is skipped") {
    ZipSpec spec = two_entries();
    // A whole fake end record whose comment length does not reach the end.
    std::string fake;
    put32(fake, 0x06054b50);
    fake += std::string(16, '\0');
    put16(fake, 1000);
    spec.comment = "before " + fake + " after";
    BuiltZip z = build_zip(spec);
    zip::Directory d = parse(z.bytes);
    CHECK(d.entries.size() == 2);
    CHECK(d.central_directory_offset == z.cd_offset);
  }
  SUBCASE("several signatures, the real end record is the one that reaches the end") {
    ZipSpec spec = two_entries();
    std::string sig;
    put32(sig, 0x06054b50);
    spec.comment = sig + sig + "PK\x05\x06" + sig + "xyz";
    BuiltZip z = build_zip(spec);
    CHECK(parse(z.bytes).entries.size() == 2);
  }
  SUBCASE("a comment that ends in a complete end record is ambiguous and rejected") {
    // Two candidate end records both reach the end of the file; the reader
    // takes the last one, whose central directory does not end where it
    // begins, so the archive is rejected rather than read two ways.
    ZipSpec spec = two_entries();
    BuiltZip plain = build_zip(spec);
    spec.comment = plain.bytes.substr(plain.eocd_offset);  // a copy, comment length 0
    BuiltZip z = build_zip(spec);
    CHECK_ERROR(parse(z.bytes), ErrorCode::corrupt, "does not end where the end records begin");
  }
  SUBCASE("a comment length that overshoots the file: no end record found") {
    ZipSpec spec = two_entries();
    spec.comment = "abc";
    spec.comment_length = 4;
    CHECK_ERROR(parse(build_zip(spec).bytes), ErrorCode::corrupt,
                "no end-of-central-directory record");
  }
}

TEST_CASE("ZIP64: end record and locator, per-entry extra fields") {
  SUBCASE("ZIP64 end record with small values") {
    ZipSpec spec = two_entries();
    spec.zip64_end = true;
    BuiltZip z = build_zip(spec);
    zip::Directory d = parse(z.bytes);
    REQUIRE(d.entries.size() == 2);
    CHECK(d.central_directory_offset == z.cd_offset);
    CHECK(d.central_directory_size == z.cd_size);
    CHECK(d.entries[1].uncompressed_size == 1000);
  }
  SUBCASE("ZIP64 extra fields for sizes and offset") {
    ZipSpec spec = two_entries();
    spec.entries[0].zip64 = true;
    spec.entries[1].zip64 = true;
    spec.zip64_end = true;
    BuiltZip z = build_zip(spec);
    zip::Directory d = parse(z.bytes);
    REQUIRE(d.entries.size() == 2);
    CHECK(d.entries[0].uncompressed_size == 5);
    CHECK(d.entries[0].compressed_size == 5);
    CHECK(d.entries[1].local_header_offset == z.local_offsets[1]);
    CHECK(d.entries[1].data_offset == z.data_offsets[1]);
  }
  SUBCASE("other extra fields before the ZIP64 one are skipped") {
    ZipSpec spec = two_entries();
    auto& e = spec.entries[1];
    const std::uint64_t csize = deflate_raw(e.content).size();
    e.compressed_size = 0xFFFFFFFFu;  // both sizes in the ZIP64 field
    e.uncompressed_size = 0xFFFFFFFFu;
    std::string extra;
    put16(extra, 0x5455);  // extended timestamp, 5 bytes
    put16(extra, 5);
    extra += std::string(5, '\x01');
    put16(extra, 0x0001);
    put16(extra, 16);
    put64(extra, 1000);
    put64(extra, csize);
    e.central_extra = extra;
    BuiltZip z = build_zip(spec);
    zip::Directory d = parse(z.bytes);
    CHECK(d.entries[1].uncompressed_size == 1000);
    CHECK(d.entries[1].compressed_size == csize);
    CHECK(d.entries[1].data_offset == z.data_offsets[1]);
  }
  SUBCASE("only the fields that are 0xFFFFFFFF are read from the extra field") {
    ZipSpec spec;
    auto e = stored("big.bin", "0123456789");
    // Central: sizes in the fixed header, only the offset in the extra field.
    e.local_offset = 0xFFFFFFFFu;
    std::string z64;
    put16(z64, 1);
    put16(z64, 8);
    put64(z64, 0);  // the true local header offset
    e.central_extra = z64;
    spec.entries.push_back(e);
    BuiltZip z = build_zip(spec);
    zip::Directory d = parse(z.bytes);
    REQUIRE(d.entries.size() == 1);
    CHECK(d.entries[0].local_header_offset == 0);
    CHECK(d.entries[0].uncompressed_size == 10);
  }
}

TEST_CASE("ZIP64 end records beside 32-bit fields that hold the real values (Python's zipfile)") {
  ZipSpec spec = two_entries();
  spec.zip64_end = true;
  spec.zip64_real_32bit = true;
  const BuiltZip good = build_zip(spec);
  const std::uint64_t eocd = good.eocd_offset;
  SUBCASE("accepted: the ZIP64 records are used") {
    zip::Directory d = parse(good.bytes);
    REQUIRE(d.entries.size() == 2);
    CHECK(d.central_directory_offset == good.cd_offset);
    CHECK(d.central_directory_size == good.cd_size);
    CHECK(d.end_of_archive == good.bytes.size());
    CHECK(d.entries[1].uncompressed_size == 1000);
  }
  SUBCASE("accepted: some fields escaped, the others real") {
    BuiltZip z = good;
    patch32(z.bytes, eocd + 12, 0xFFFFFFFFu);  // central directory size
    CHECK(parse(z.bytes).entries.size() == 2);
    patch16(z.bytes, eocd + 8, 0xFFFF);  // entries on this disk and in total
    patch16(z.bytes, eocd + 10, 0xFFFF);
    CHECK(parse(z.bytes).entries.size() == 2);
  }
  SUBCASE("rejected: a 32-bit field that is neither escaped nor the ZIP64 value") {
    BuiltZip z = good;
    patch16(z.bytes, eocd + 8, 3);
    patch16(z.bytes, eocd + 10, 3);
    CHECK_ERROR(parse(z.bytes), ErrorCode::corrupt,
                "the end-of-central-directory record and the ZIP64 end record disagree on the "
                "entry count (3 vs 2)");
    z = good;
    patch32(z.bytes, eocd + 12, good.cd_size + 1);
    CHECK_ERROR(parse(z.bytes), ErrorCode::corrupt,
                "disagree on the central directory size (" + std::to_string(good.cd_size + 1) +
                    " vs " + std::to_string(good.cd_size) + ")");
    z = good;
    patch32(z.bytes, eocd + 16, good.cd_offset - 1);
    CHECK_ERROR(parse(z.bytes), ErrorCode::corrupt, "disagree on the central directory offset");
  }
  SUBCASE("rejected: a ZIP64 record that does not end where the locator begins") {
    BuiltZip z = good;
    patch64(z.bytes, *z.zip64_end_offset + 4, 45);
    CHECK_ERROR(parse(z.bytes), ErrorCode::corrupt,
                "ZIP64 end-of-central-directory record of 45 bytes does not end where the "
                "locator begins");
    patch64(z.bytes, *z.zip64_end_offset + 4, 43);
    CHECK_ERROR(parse(z.bytes), ErrorCode::corrupt, "record of 43 bytes");
  }
  SUBCASE("rejected: ZIP64 records of several disks") {
    BuiltZip z = good;
    patch32(z.bytes, *z.zip64_locator_offset + 16, 2);  // total disks
    CHECK_ERROR(parse(z.bytes), ErrorCode::corrupt, "multi-disk archives are not supported");
    z = good;
    patch32(z.bytes, *z.zip64_locator_offset + 4, 1);  // disk of the ZIP64 record
    CHECK_ERROR(parse(z.bytes), ErrorCode::corrupt, "multi-disk");
    z = good;
    patch64(z.bytes, *z.zip64_end_offset + 24, 1);  // entries on this disk
    CHECK_ERROR(parse(z.bytes), ErrorCode::corrupt, "multi-disk");
  }
  SUBCASE("a locator signature inside a directory that ends at the end record is data") {
    ZipSpec plain = two_entries();
    std::string fake;
    put32(fake, 0x07064b50);
    fake += std::string(16, '\x7F');
    plain.entries[1].comment = fake;  // the last 20 bytes of the central directory
    BuiltZip z = build_zip(plain);
    REQUIRE(get32(z.bytes, z.eocd_offset - 20) == 0x07064b50u);
    zip::Directory d = parse(z.bytes);
    CHECK(d.entries.size() == 2);
    CHECK(d.central_directory_offset == z.cd_offset);
  }
}

TEST_CASE("Trailing bytes after the end record and its comment are ignored") {
  SUBCASE("a newline") {
    ZipSpec spec = two_entries();
    spec.trailing = "\n";
    BuiltZip z = build_zip(spec);
    zip::Directory d = parse(z.bytes);
    CHECK(d.entries.size() == 2);
    CHECK(d.end_of_archive == z.bytes.size() - 1);
    CHECK(d.comment.empty());
  }
  SUBCASE("a comment, then trailing bytes holding a signature whose comment does not fit") {
    ZipSpec spec = two_entries();
    spec.comment = "the comment";
    spec.trailing = "PK\x05\x06 and some more bytes";
    BuiltZip z = build_zip(spec);
    zip::Directory d = parse(z.bytes);
    CHECK(d.entries.size() == 2);
    CHECK(d.comment == "the comment");
    CHECK(d.end_of_archive == z.eocd_offset + 22 + 11);
  }
  SUBCASE("with ZIP64 end records") {
    ZipSpec spec = two_entries();
    spec.zip64_end = true;
    spec.zip64_real_32bit = true;
    spec.trailing = std::string(4096, '\0');
    CHECK(parse(build_zip(spec).bytes).entries.size() == 2);
  }
  SUBCASE("rejected: the end record beyond the last 65557 bytes") {
    ZipSpec spec = two_entries();
    spec.trailing = std::string(65536, ' ');
    CHECK_ERROR(parse(build_zip(spec).bytes), ErrorCode::corrupt,
                "no end-of-central-directory record");
    spec.trailing = std::string(65535, ' ');
    CHECK(parse(build_zip(spec).bytes).entries.size() == 2);
  }
  SUBCASE("rejected: a comment length beyond the file, trailing bytes or not") {
    ZipSpec spec = two_entries();
    spec.comment = "abc";
    spec.trailing = "xyz";
    spec.comment_length = 7;
    CHECK_ERROR(parse(build_zip(spec).bytes), ErrorCode::corrupt,
                "no end-of-central-directory record");
    spec.comment_length = 6;  // reaches the end exactly: comment "abcxyz"
    CHECK(parse(build_zip(spec).bytes).comment == "abcxyz");
  }
}

TEST_CASE("Data descriptors: sizes come from the central directory") {
  ZipSpec spec = two_entries();
  spec.entries[0].data_descriptor = true;
  spec.entries[1].data_descriptor = true;
  BuiltZip z = build_zip(spec);
  zip::Directory d = parse(z.bytes);
  REQUIRE(d.entries.size() == 2);
  CHECK(d.entries[0].uncompressed_size == 5);
  CHECK((d.entries[0].flags & 0x0008) != 0);
  CHECK(d.entries[1].data_offset == z.data_offsets[1]);
  CHECK(d.entries[1].compressed_size == deflate_raw(std::string(1000, 'x')).size());

  SUBCASE("with ZIP64 descriptors") {
    spec.entries[1].zip64 = true;
    spec.zip64_end = true;
    BuiltZip z64 = build_zip(spec);
    zip::Directory d64 = parse(z64.bytes);
    CHECK(d64.entries[1].uncompressed_size == 1000);
    CHECK(d64.entries[1].data_offset == z64.data_offsets[1]);
  }
}

TEST_CASE("Folder entries (names ending in '/') are accepted") {
  ZipSpec spec;
  spec.entries.push_back(stored("dir/", ""));
  spec.entries.push_back(stored("dir/x", "1"));
  zip::Directory d = parse(build_zip(spec).bytes);
  REQUIRE(d.entries.size() == 2);
  CHECK(d.entries[0].name == "dir/");
}

TEST_CASE("Rejected: too short, no end record, multi-disk") {
  CHECK_ERROR(parse(""), ErrorCode::corrupt, "shorter than an end-of-central-directory record");
  CHECK_ERROR(parse(std::string(21, '\0')), ErrorCode::corrupt, "21 bytes");
  CHECK_ERROR(parse(std::string(5000, 'z')), ErrorCode::corrupt,
              "no end-of-central-directory record");
  ZipSpec spec = two_entries();
  spec.disk = 1;
  CHECK_ERROR(parse(build_zip(spec).bytes), ErrorCode::corrupt, "multi-disk archives");
  spec = two_entries();
  spec.entries[1].disk_start = 2;
  REQUIRE_ERROR_AS(err, parse(build_zip(spec).bytes), ErrorCode::corrupt, "multi-disk entry");
  CHECK(err.context().entry == "dir/b.bin");
}

TEST_CASE("Rejected: broken ZIP64 end records") {
  SUBCASE("fields say ZIP64 but there is no locator") {
    ZipSpec spec = two_entries();
    spec.cd_size = 0xFFFFFFFFu;
    CHECK_ERROR(parse(build_zip(spec).bytes), ErrorCode::corrupt,
                "ZIP64 end-of-central-directory locator missing");
  }
  SUBCASE("the end record is at the very start of the file") {
    std::string eocd;
    put32(eocd, 0x06054b50);
    put16(eocd, 0);
    put16(eocd, 0);
    put16(eocd, 0xFFFF);
    put16(eocd, 0xFFFF);
    put32(eocd, 0);
    put32(eocd, 0);
    put16(eocd, 0);
    CHECK_ERROR(parse(eocd), ErrorCode::corrupt, "locator missing");
  }
  SUBCASE("locator points outside the file") {
    ZipSpec spec = two_entries();
    spec.zip64_end = true;
    BuiltZip z = build_zip(spec);
    patch64(z.bytes, *z.zip64_locator_offset + 8, 0xFFFFFFFFFFFFFFF0ull);
    CHECK_ERROR(parse(z.bytes), ErrorCode::corrupt,
                "ZIP64 end-of-central-directory record offset out of range");
    patch64(z.bytes, *z.zip64_locator_offset + 8, *z.zip64_locator_offset - 55);
    CHECK_ERROR(parse(z.bytes), ErrorCode::corrupt, "out of range");
  }
  SUBCASE("bad ZIP64 record signature") {
    ZipSpec spec = two_entries();
    spec.zip64_end = true;
    BuiltZip z = build_zip(spec);
    z.bytes[*z.zip64_end_offset] = 'X';
    CHECK_ERROR(parse(z.bytes), ErrorCode::corrupt, "bad ZIP64 end-of-central-directory signature");
  }
  SUBCASE("ZIP64 record declares an absurd entry count") {
    ZipSpec spec = two_entries();
    spec.zip64_end = true;
    spec.count = 1ull << 40;
    CHECK_ERROR(parse(build_zip(spec).bytes), ErrorCode::limit_exceeded, "1099511627776 entries");
  }
  SUBCASE("ZIP64 record: central directory size overflows with the offset") {
    ZipSpec spec = two_entries();
    spec.zip64_end = true;
    spec.cd_size = ~0ull;
    CHECK_ERROR(parse(build_zip(spec).bytes), ErrorCode::corrupt, "does not end where");
  }
}

TEST_CASE("Rejected: the central directory is not where the end record says") {
  ZipSpec spec = two_entries();
  BuiltZip good = build_zip(spec);
  spec.cd_offset = good.cd_offset - 1;
  CHECK_ERROR(parse(build_zip(spec).bytes), ErrorCode::corrupt,
              "does not end where the end records begin");
  spec = two_entries();
  spec.cd_size = good.cd_size + 1;
  CHECK_ERROR(parse(build_zip(spec).bytes), ErrorCode::corrupt, "does not end where");
  spec = two_entries();
  spec.cd_offset = 0xFFFFFFF0u;
  spec.zip64_end = false;
  CHECK_ERROR(parse(build_zip(spec).bytes), ErrorCode::corrupt, "does not end where");
  spec = two_entries();
  spec.between = "garbage between the entries and the directory";
  CHECK(parse(build_zip(spec).bytes).entries.size() == 2);  // unused bytes are allowed
}

TEST_CASE("Rejected: declared entry counts that the directory cannot hold") {
  ZipSpec spec = two_entries();
  spec.count = 3;
  CHECK_ERROR(parse(build_zip(spec).bytes), ErrorCode::corrupt,
              "declares 3 entries in a central directory of");
  spec.count = 0xFFFE;
  CHECK_ERROR(parse(build_zip(spec).bytes), ErrorCode::corrupt, "declares 65534 entries");
  Limits small;
  small.max_entries = 1;
  CHECK_ERROR(parse(build_zip(two_entries()).bytes, small), ErrorCode::limit_exceeded,
              "archive declares 2 entries, the limit is 1");
  // Fewer declared than present: the rest of the directory is ignored, but
  // what is read must be valid.
  spec = two_entries();
  spec.count = 1;
  zip::Directory d = parse(build_zip(spec).bytes);
  CHECK(d.entries.size() == 1);
}

TEST_CASE("Rejected: broken central directory records") {
  ZipSpec spec = two_entries();
  BuiltZip z = build_zip(spec);
  SUBCASE("bad signature of the second record") {
    z.bytes[z.central_offsets[1]] = 'Q';
    REQUIRE_ERROR_AS(err, parse(z.bytes), ErrorCode::corrupt,
                     "bad central directory signature for entry 1");
    CHECK(err.context().offset == z.central_offsets[1]);
  }
  SUBCASE("name length runs past the directory") {
    patch16(z.bytes, z.central_offsets[1] + 28, 5000);
    CHECK_ERROR(parse(z.bytes), ErrorCode::corrupt, "entry name: needs 5000 bytes");
  }
  SUBCASE("extra length runs past the directory") {
    patch16(z.bytes, z.central_offsets[1] + 30, 300);
    CHECK_ERROR(parse(z.bytes), ErrorCode::corrupt, "extra fields: needs 300 bytes");
  }
  SUBCASE("comment length runs past the directory") {
    patch16(z.bytes, z.central_offsets[1] + 32, 300);
    CHECK_ERROR(parse(z.bytes), ErrorCode::corrupt, "entry comment: needs 300 bytes");
  }
  SUBCASE("an extra field's length runs past the extra area") {
    spec.entries[1].central_extra = std::string("\x55\x54\x10\x00", 4) + "ab";
    CHECK_ERROR(parse(build_zip(spec).bytes), ErrorCode::corrupt, "extra field: needs 16 bytes");
  }
}

TEST_CASE("unsafe_name_reason: every rule") {
  using zip::unsafe_name_reason;
  CHECK(unsafe_name_reason("a/b/c.txt").empty());
  CHECK(unsafe_name_reason("dir/").empty());
  CHECK(unsafe_name_reason("d\xC3\xA9j\xC3\xA0/\xF0\x9F\x98\x80").empty());
  CHECK(unsafe_name_reason("a..b/..c").empty());  // ".." only as a whole component
  CHECK(unsafe_name_reason("") == "empty entry name");
  CHECK(unsafe_name_reason(std::string("a\0b", 3)) == "entry name contains a NUL byte");
  CHECK(unsafe_name_reason("a\\b") == "entry name contains a backslash");
  CHECK(unsafe_name_reason("/etc/passwd") == "absolute entry name");
  CHECK(unsafe_name_reason("C:evil") == "entry name starts with a drive letter");
  CHECK(unsafe_name_reason("..") == "entry name contains a '..' component");
  CHECK(unsafe_name_reason("../x") == "entry name contains a '..' component");
  CHECK(unsafe_name_reason("a/../../x") == "entry name contains a '..' component");
  CHECK(unsafe_name_reason("a/..") == "entry name contains a '..' component");
  CHECK(unsafe_name_reason("./x") == "entry name contains a '.' component");
  CHECK(unsafe_name_reason("a/./x") == "entry name contains a '.' component");
  CHECK(unsafe_name_reason("a//x") == "entry name contains an empty component");
  CHECK(unsafe_name_reason("a\nb") == "entry name contains a control character");
  CHECK(unsafe_name_reason("a\x7F") == "entry name contains a control character");
  CHECK(unsafe_name_reason("a\x1F") == "entry name contains a control character");
  CHECK(unsafe_name_reason("x\xC3") == "entry name is not valid UTF-8 at byte 1");
  CHECK(unsafe_name_reason("\xC0\xAF") ==
        "entry name is not valid UTF-8 at byte 0");  // overlong '/'
  CHECK(unsafe_name_reason("\xED\xA0\x80") ==
        "entry name is not valid UTF-8 at byte 0");  // surrogate
}

TEST_CASE("Rejected: unsafe entry names, naming the entry") {
  const char* names[] = {"../evil", "/abs", "a\\b",        "a/../../b",
                         "C:/x",    "a//b", "bad\xFFname", "ctl\x01"};
  for (const char* name : names) {
    INFO("name " << name);
    ZipSpec spec = two_entries();
    spec.entries[1].name = name;
    REQUIRE_ERROR_AS(err, parse(build_zip(spec).bytes), ErrorCode::corrupt, "entry name");
    CHECK(err.context().entry == name);
  }
  ZipSpec spec = two_entries();
  spec.entries[0].name = std::string("a\0b", 3);
  // what() holds the raw name (with its NUL): check the bare message.
  auto nul = caught([&] { parse(build_zip(spec).bytes); });
  REQUIRE(nul.has_value());
  CHECK(nul->code() == ErrorCode::corrupt);
  CHECK(nul->message() == "entry name contains a NUL byte");
  CHECK(nul->context().entry == std::string("a\0b", 3));
}

TEST_CASE("Rejected: ZIP64 values missing from the extra field") {
  ZipSpec spec;
  auto e = stored("x", "12345");
  e.compressed_size = 0xFFFFFFFFu;
  e.uncompressed_size = 0xFFFFFFFFu;
  spec.entries.push_back(e);
  REQUIRE_ERROR_AS(err, parse(build_zip(spec).bytes), ErrorCode::corrupt,
                   "sizes need a ZIP64 extra field, but there is none");
  CHECK(err.context().entry == "x");
  std::string short_z64;
  put16(short_z64, 1);
  put16(short_z64, 8);
  put64(short_z64, 5);  // the uncompressed size only
  spec.entries[0].central_extra = short_z64;
  CHECK_ERROR(parse(build_zip(spec).bytes), ErrorCode::corrupt,
              "ZIP64 compressed size: needs 8 bytes, only 0 left");
}

TEST_CASE("Rejected as unsupported: encryption and other methods") {
  ZipSpec spec = two_entries();
  spec.entries[0].flags |= 0x0001;
  REQUIRE_ERROR_AS(err, parse(build_zip(spec).bytes), ErrorCode::unsupported,
                   "encrypted entries are not supported");
  CHECK(err.context().entry == "a.txt");
  spec = two_entries();
  spec.entries[1].method = 12;  // bzip2
  REQUIRE_ERROR_AS(err2, parse(build_zip(spec).bytes), ErrorCode::unsupported,
                   "compression method 12 is not supported");
  CHECK(err2.context().entry == "dir/b.bin");
}

TEST_CASE("Rejected: a stored entry whose two sizes differ") {
  ZipSpec spec = two_entries();
  spec.entries[0].uncompressed_size = 6;
  REQUIRE_ERROR_AS(err, parse(build_zip(spec).bytes), ErrorCode::corrupt,
                   "stored entry declares 6 bytes but holds 5");
  CHECK(err.context().entry == "a.txt");
}

TEST_CASE("Rejected: a deflated entry declaring more than 1100:1 (+1024)") {
  ZipSpec spec = two_entries();
  const std::uint64_t c = deflate_raw(std::string(1000, 'x')).size();
  spec.entries[1].uncompressed_size = c * 1100 + 1024;  // the largest allowed
  zip::Directory d = parse(build_zip(spec).bytes);
  CHECK(d.entries[1].uncompressed_size == c * 1100 + 1024);
  spec.entries[1].uncompressed_size = c * 1100 + 1025;
  REQUIRE_ERROR_AS(err, parse(build_zip(spec).bytes), ErrorCode::limit_exceeded, "zip bomb");
  CHECK(err.context().entry == "dir/b.bin");
  // Through ZIP64: 2^62 bytes from a few bytes.
  spec.entries[1].zip64 = true;
  spec.entries[1].uncompressed_size = 1ull << 62;
  CHECK_ERROR(parse(build_zip(spec).bytes), ErrorCode::limit_exceeded, "4611686018427387904 bytes");
  // A custom ratio.
  Limits strict;
  strict.max_deflate_ratio = 2;
  spec = two_entries();
  CHECK(parse(build_zip(spec).bytes, strict).entries.size() == 2);  // 1000 <= c * 2 + 1024
  spec.entries[1].content = std::string(100000, 'x');
  CHECK_ERROR(parse(build_zip(spec).bytes, strict), ErrorCode::limit_exceeded, "zip bomb");
}

TEST_CASE("Rejected: local headers outside the entry area, broken or disagreeing") {
  ZipSpec spec = two_entries();
  BuiltZip good = build_zip(spec);
  SUBCASE("offset at the central directory") {
    spec.entries[1].local_offset = good.cd_offset;
    REQUIRE_ERROR_AS(err, parse(build_zip(spec).bytes), ErrorCode::corrupt,
                     "is outside the entry area");
    CHECK(err.context().entry == "dir/b.bin");
  }
  SUBCASE("offset 29 bytes before the central directory") {
    spec.entries[1].local_offset = good.cd_offset - 29;
    CHECK_ERROR(parse(build_zip(spec).bytes), ErrorCode::corrupt, "outside the entry area");
  }
  SUBCASE("offset near 2^64 through ZIP64") {
    spec.entries[1].zip64 = true;
    spec.entries[1].local_offset = ~0ull - 5;
    CHECK_ERROR(parse(build_zip(spec).bytes), ErrorCode::corrupt, "outside the entry area");
  }
  SUBCASE("bad local signature") {
    spec.entries[1].local_offset = 1;
    REQUIRE_ERROR_AS(err, parse(build_zip(spec).bytes), ErrorCode::corrupt,
                     "bad local header signature");
    CHECK(err.context().entry == "dir/b.bin");
    CHECK(err.context().offset == 1u);
  }
  SUBCASE("local name differs") {
    spec.entries[1].local_name = "dir/c.bin";
    REQUIRE_ERROR_AS(err, parse(build_zip(spec).bytes), ErrorCode::corrupt,
                     "local header name differs from the central directory");
    CHECK(err.context().entry == "dir/b.bin");
  }
  SUBCASE("local name length runs into the central directory") {
    BuiltZip z = build_zip(spec);
    patch16(z.bytes, z.local_offsets[1] + 26, 60000);
    CHECK_ERROR(parse(z.bytes), ErrorCode::corrupt, "local header name differs");
  }
  SUBCASE("local extra length pushes the data past the entry area") {
    BuiltZip z = build_zip(spec);
    patch16(z.bytes, z.local_offsets[1] + 28, 60000);
    REQUIRE_ERROR_AS(err, parse(z.bytes), ErrorCode::corrupt, "extends past the entry area");
    CHECK(err.context().entry == "dir/b.bin");
  }
  SUBCASE("sizes that run into the central directory") {
    spec.entries[0].compressed_size = 5000;
    spec.entries[0].uncompressed_size = 5000;
    REQUIRE_ERROR_AS(err, parse(build_zip(spec).bytes), ErrorCode::corrupt,
                     "entry data [35, +5000) extends past the entry area");
    CHECK(err.context().entry == "a.txt");
  }
  SUBCASE("huge ZIP64 compressed size: no overflow") {
    spec.entries[1].zip64 = true;
    spec.entries[1].compressed_size = ~0ull - 10;
    spec.entries[1].uncompressed_size = 1;
    CHECK_ERROR(parse(build_zip(spec).bytes), ErrorCode::corrupt, "extends past the entry area");
  }
}

TEST_CASE("Rejected: duplicate names (byte-exact) and overlapping entries") {
  ZipSpec spec = two_entries();
  spec.entries.push_back(stored("a.txt", "again"));
  REQUIRE_ERROR_AS(err, parse(build_zip(spec).bytes), ErrorCode::corrupt, "duplicate entry name");
  CHECK(err.context().entry == "a.txt");
  // Names differing in case are distinct zip entries.
  spec.entries.back().name = "A.txt";
  CHECK(parse(build_zip(spec).bytes).entries.size() == 3);

  SUBCASE("two central records point at one local header") {
    ZipSpec s;
    s.entries.push_back(stored("a", "1234"));
    s.entries.push_back(stored("a", "1234"));
    s.entries[1].local_offset = 0;
    // The names are equal (they must match one local header): duplicate.
    CHECK_ERROR(parse(build_zip(s).bytes), ErrorCode::corrupt, "duplicate entry name");
  }
  SUBCASE("an entry hidden inside another entry's data") {
    ZipSpec s;
    s.entries.push_back(stored("outer", embedded_local_entry("inner", "secret")));
    BuiltZip first = build_zip(s);
    auto inner = stored("inner", "secret");
    inner.local_offset = first.data_offsets[0];  // the embedded local header
    s.entries.push_back(inner);
    BuiltZip z = build_zip(s);
    REQUIRE_ERROR_AS(err2, parse(z.bytes), ErrorCode::corrupt, "entry overlaps entry 'outer'");
    CHECK(err2.context().entry == "inner");
    CHECK(err2.context().offset == first.data_offsets[0]);
  }
  SUBCASE("data that runs into the next local header") {
    ZipSpec s;
    s.entries.push_back(stored("a", "1234"));
    s.entries.push_back(stored("b", "5678"));
    s.entries[0].compressed_size = 10;
    s.entries[0].uncompressed_size = 10;
    CHECK_ERROR(parse(build_zip(s).bytes), ErrorCode::corrupt, "entry overlaps entry 'a'");
  }
  SUBCASE("overlap is checked in file order, not directory order") {
    ZipSpec s;
    s.entries.push_back(stored("a", "1234"));
    s.entries.push_back(stored("b", "5678"));
    BuiltZip z = build_zip(s);
    // Swap the central records: still valid (no overlap).
    std::string rec_a =
        z.bytes.substr(z.central_offsets[0], z.central_offsets[1] - z.central_offsets[0]);
    std::string rec_b =
        z.bytes.substr(z.central_offsets[1], z.cd_offset + z.cd_size - z.central_offsets[1]);
    std::string swapped =
        z.bytes.substr(0, z.cd_offset) + rec_b + rec_a + z.bytes.substr(z.cd_offset + z.cd_size);
    zip::Directory d = parse(swapped);
    REQUIRE(d.entries.size() == 2);
    CHECK(d.entries[0].name == "b");
    CHECK(d.entries[1].name == "a");
  }
}

TEST_CASE("Truncation at every structural boundary gives Error(corrupt), never a crash") {
  ZipSpec spec = two_entries();
  spec.entries[1].zip64 = true;
  spec.zip64_end = true;
  spec.comment = "c";
  BuiltZip z = build_zip(spec);
  for (std::uint64_t cut : z.boundaries()) {
    if (cut == z.bytes.size()) continue;
    INFO("cut at " << cut);
    for (std::uint64_t at : {cut, cut + 1}) {
      if (at >= z.bytes.size()) continue;
      auto err = caught([&] { parse(z.bytes.substr(0, at)); });
      REQUIRE(err.has_value());
      CHECK(err->code() == ErrorCode::corrupt);
    }
  }
  // Every prefix of the small plain archive, and the archive with its first
  // bytes removed (offsets no longer match).
  BuiltZip plain = build_zip(two_entries());
  for (std::size_t n = 0; n < plain.bytes.size(); ++n) {
    auto err = caught([&] { parse(plain.bytes.substr(0, n)); });
    REQUIRE_MESSAGE(err.has_value(), "prefix " << n);
    CHECK(err->code() == ErrorCode::corrupt);
  }
  CHECK(caught([&] { parse(plain.bytes.substr(1)); }).has_value());
}

TEST_CASE("Directory::find: every entry by its exact name, nothing else") {
  ZipSpec spec;
  // Enough entries for the name index to be large and its probes to collide.
  for (int i = 0; i < 3000; ++i)
    spec.entries.push_back(stored(
        "t" + std::to_string(i % 7) + "/params/" + std::to_string(i) + ".fb", std::to_string(i)));
  zip::Directory d = parse(build_zip(spec).bytes);
  REQUIRE(d.entries.size() == 3000);
  for (int i = 0; i < 3000; ++i) {
    const std::string name = "t" + std::to_string(i % 7) + "/params/" + std::to_string(i) + ".fb";
    const zip::EntryInfo* e = d.find(name);
    REQUIRE(e != nullptr);
    CHECK(e->name == name);
  }
  CHECK(d.find("t0/params/1.fb") == nullptr);  // 1 is in t1
  CHECK(d.find("") == nullptr);
  CHECK(d.find("T0/params/0.fb") == nullptr);  // exact bytes only
  zip::Directory copy = d;                     // positions stay valid for a copy
  CHECK(copy.find("t3/params/3.fb") == &copy.entries[3]);
  CHECK(zip::Directory{}.find("a") == nullptr);

  // A duplicate far from its twin is still found.
  spec.entries.push_back(stored("t5/params/2000.fb", "again"));
  REQUIRE_ERROR_AS(err, parse(build_zip(spec).bytes), ErrorCode::corrupt, "duplicate entry name");
  CHECK(err.context().entry == "t5/params/2000.fb");
}

TEST_CASE("unsafe_name_reason: the quick path and the full rules agree") {
  // Safe names, ASCII and not.
  for (const char* ok :
       {"a", "a/b", "a/b/", "a.b/c..d/.e", "..a", "a..", "x y", "~/~", "\xC3\xA9/b"})
    CHECK_MESSAGE(zip::unsafe_name_reason(ok).empty(), ok);
  const std::pair<std::string, std::string> bad[] = {
      {"", "empty entry name"},       {"/a", "absolute entry name"},
      {"c:/a", "drive letter"},       {"a\\b", "backslash"},
      {"a/../b", "'..' component"},   {"..", "'..' component"},
      {"a/./b", "'.' component"},     {"./a", "'.' component"},
      {"a//b", "empty component"},    {"a\tb", "control character"},
      {"a\x7F", "control character"}, {std::string("a\0b", 3), "NUL byte"},
      {"a\xFF", "not valid UTF-8"},
  };
  for (const auto& name_and_reason : bad) {
    const std::string& name = name_and_reason.first;
    const std::string& reason = name_and_reason.second;
    CAPTURE(name);
    CHECK(zip::unsafe_name_reason(name).find(reason) != std::string::npos);
  }
}
