// Structural checks of a zip archive written by modelzip, independent of
// the writer's code (tests only): every local header agrees with its
// central record (version needed, flags, method, time, CRC, sizes or their
// ZIP64 field, name), its extra fields are only ZIP64 (0x0001) and the
// padding field (0x7A6D, zeros), stored data starts at a multiple of 64,
// each entry's CRC is zlib's crc32 of its data (inflated where deflated),
// and, where asked, `unzip -t` and Python's zipfile accept the file.
// Failures are doctest CHECKs naming the entry.
#pragma once

#include <doctest/doctest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "io/mapped_file.hpp"
#include "modelzip/limits.hpp"
#include "zip/zip_directory.hpp"
#include "zip/zip_reader.hpp"

namespace modelzip::testing {

inline std::uint64_t le_at(const std::byte* p, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint64_t>(p[i]);
  return v;
}

// Checks `path` as above; with `tools`, also unzip and Python's zipfile.
inline void check_zip_structure(const std::filesystem::path& path, bool tools = true) {
  INFO("archive " << path.string());
  const Bytes file = io::map_file(path);
  const modelzip::zip::Directory d = modelzip::zip::parse_directory(file.span(), Limits{});
  const std::byte* base = file.data();
  modelzip::zip::EntryReader reader(file, Limits{});
  std::uint64_t central = d.central_directory_offset;
  for (const auto& e : d.entries) {
    INFO("entry " << e.name);
    const std::byte* c = base + central;
    REQUIRE(le_at(c, 4) == 0x02014b50u);
    const std::uint64_t cn = le_at(c + 28, 2), cx = le_at(c + 30, 2), cm = le_at(c + 32, 2);
    const std::byte* l = base + e.local_header_offset;
    REQUIRE(le_at(l, 4) == 0x04034b50u);
    CHECK(le_at(l + 4, 2) == le_at(c + 6, 2));    // version needed
    CHECK(le_at(l + 6, 2) == le_at(c + 8, 2));    // flags
    CHECK(le_at(l + 8, 2) == le_at(c + 10, 2));   // method
    CHECK(le_at(l + 10, 4) == le_at(c + 12, 4));  // time and date
    CHECK(le_at(l + 14, 4) == e.crc32);
    CHECK(le_at(c + 16, 4) == e.crc32);
    // Non-ASCII names carry the UTF-8 flag (ASCII ones may: copies keep it).
    CHECK(((e.flags & 0x0800) != 0) >=
          std::any_of(e.name.begin(), e.name.end(),
                      [](char ch) { return static_cast<unsigned char>(ch) >= 0x80; }));
    const std::uint64_t ln = le_at(l + 26, 2), lx = le_at(l + 28, 2);
    CHECK(ln == cn);
    CHECK(std::string(reinterpret_cast<const char*>(l + 30), ln) == e.name);
    // Local extra fields: ZIP64 with both sizes, padding of zeros.
    bool zip64 = false;
    for (std::uint64_t p = 30 + ln; p + 4 <= 30 + ln + lx;) {
      const std::uint64_t id = le_at(l + p, 2), len = le_at(l + p + 2, 2);
      if (id == 0x0001) {
        zip64 = true;
        REQUIRE(len == 16);
        CHECK(le_at(l + p + 4, 8) == e.uncompressed_size);
        CHECK(le_at(l + p + 12, 8) == e.compressed_size);
      } else {
        CHECK(id == 0x7A6D);
        for (std::uint64_t i = 0; i < len; ++i) CHECK(l[p + 4 + i] == std::byte{0});
      }
      p += 4 + len;
    }
    if (!zip64) {
      CHECK(le_at(l + 18, 4) == e.compressed_size);
      CHECK(le_at(l + 22, 4) == e.uncompressed_size);
    }
    const std::uint64_t data_offset = e.local_header_offset + 30 + ln + lx;
    if (e.stored()) CHECK(data_offset % 64 == 0);
    const Bytes data = reader.read(e, false);  // not CRC-checked here: zlib below
    const uLong crc = ::crc32_z(0, reinterpret_cast<const Bytef*>(data.data()), data.size());
    CHECK(crc == e.crc32);
    central += 46 + cn + cx + cm;
  }
  if (!tools) return;
  if (std::system("command -v unzip >/dev/null 2>&1") == 0) {
    const std::string cmd = "unzip -tqq '" + path.string() + "' >/dev/null 2>&1";
    CHECK_MESSAGE(std::system(cmd.c_str()) == 0, "unzip -t refused " << path.string());
  }
  const std::string py = "/usr/bin/python3 -c 'import sys, zipfile; "
                         "sys.exit(zipfile.ZipFile(sys.argv[1]).testzip() is not None)' '" +
                         path.string() + "' >/dev/null 2>&1";
  CHECK_MESSAGE(std::system(py.c_str()) == 0, "Python's zipfile refused " << path.string());
}

}  // namespace modelzip::testing
