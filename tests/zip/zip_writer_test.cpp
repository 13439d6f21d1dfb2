// modelzip::zip::ZipWriter: stored data at 64-byte aligned offsets whatever the name
// length, entries made of several pieces, raw copies of deflated entries,
// deterministic output, and archives that other zip tools accept.
#include <doctest/doctest.h>

#include <cstdlib>

#include "expect_error.hpp"
#include "io/mapped_file.hpp"
#include "modelzip/error.hpp"
#include "test_support.hpp"
#include "zip/zip_directory.hpp"
#include "zip/zip_reader.hpp"
#include "zip/zip_writer.hpp"
#include "zip_builder.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

std::string pattern(std::size_t n, int seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 31 + seed + i / 7) & 0xFF);
  return s;
}

std::string text(const Bytes& b) {
  return std::string(b.as_string_view());
}

// Extra fields of the local header of `e`, as (id, body length) pairs.
std::vector<std::pair<std::uint64_t, std::uint64_t>> local_extras(
    const std::string& file, const modelzip::zip::EntryInfo& e) {
  std::size_t lh = e.local_header_offset;
  std::uint64_t name_len = get16(file, lh + 26), extra_len = get16(file, lh + 28);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  std::size_t p = lh + 30 + name_len, end = p + extra_len;
  while (p + 4 <= end) {
    out.emplace_back(get16(file, p), get16(file, p + 2));
    p += 4 + get16(file, p + 2);
  }
  return out;
}

}  // namespace

TEST_CASE("Every stored entry is 64-byte aligned, for name lengths 1 to 130") {
  TempDir dir;
  auto path = dir / "aligned.zip";
  std::vector<std::pair<std::string, std::string>> expected;
  {
    modelzip::zip::ZipWriter w(path);
    for (int len = 1; len <= 130; ++len) {
      std::string name(static_cast<std::size_t>(len), 'n');
      name[0] = static_cast<char>('a' + len % 26);
      name += std::to_string(len);
      std::string data = pattern(static_cast<std::size_t>(len * 3 + 1), len);
      w.add_stored(name, {Bytes::copy_of(data)});
      expected.emplace_back(name, data);
    }
    w.add_deflated("deflated.bin", {Bytes::copy_of(pattern(5000, 9))});
    w.close(nullptr);
  }
  std::string file = io_bytes(path);
  Bytes mapped = io::map_file(path);
  modelzip::zip::Directory d = modelzip::zip::parse_directory(mapped.span(), Limits{});
  REQUIRE(d.entries.size() == expected.size() + 1);
  modelzip::zip::EntryReader reader(mapped, Limits{});
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& e = d.entries[i];
    INFO("entry " << e.name);
    CHECK(e.name == expected[i].first);
    CHECK(e.stored());
    CHECK(e.data_offset % 64 == 0);
    CHECK(text(reader.read(e, true)) == expected[i].second);
    // The padding is a local-only extra field "mz" of 0 to 63 bytes body.
    for (auto [id, len] : local_extras(file, e)) {
      CHECK(id == modelzip::zip::kPaddingExtraId);
      CHECK(len < 64);
    }
  }
  // Central records carry no padding field (it is local only).
  for (std::size_t i = 0, p = d.central_directory_offset; i < d.entries.size(); ++i) {
    std::uint64_t n = get16(file, p + 28), x = get16(file, p + 30), m = get16(file, p + 32);
    CHECK(x == 0);
    p += 46 + n + x + m;
  }
  const auto& last = d.entries.back();
  CHECK(last.method == modelzip::zip::kMethodDeflate);
  CHECK(last.compressed_size < 5000);
  CHECK(text(reader.read(last, true)) == pattern(5000, 9));
}

TEST_CASE("An entry is the concatenation of its pieces (empty pieces included)") {
  TempDir dir;
  auto path = dir / "pieces.zip";
  std::string a = pattern(1000, 1), b = pattern(3, 2), c = pattern(70000, 3);
  {
    modelzip::zip::ZipWriter w(path);
    w.add_stored("s", {Bytes::copy_of(a), Bytes(), Bytes::copy_of(b), Bytes::copy_of(c)});
    w.add_stored("empty", {});
    w.add_deflated("d", {Bytes::copy_of(c), Bytes(), Bytes::copy_of(a)});
    w.close(nullptr);
  }
  Bytes mapped = io::map_file(path);
  modelzip::zip::Directory d = modelzip::zip::parse_directory(mapped.span(), Limits{});
  modelzip::zip::EntryReader r(mapped, Limits{});
  REQUIRE(d.entries.size() == 3);
  CHECK(text(r.read(d.entries[0], true)) == a + b + c);
  CHECK(r.read(d.entries[1], true).empty());
  CHECK(text(r.read(d.entries[2], true)) == c + a);
  CHECK(d.entries[2].crc32 == crc32_of(c + a));
}

TEST_CASE("Raw copies keep the compressed bytes of the source unchanged") {
  TempDir dir;
  std::string content = pattern(50000, 4);
  ZipSpec spec;
  spec.entries.push_back(deflated("src/x.bin", content));
  BuiltZip src = build_zip(spec);
  Bytes src_bytes = Bytes::copy_of(src.bytes);
  modelzip::zip::Directory sd = modelzip::zip::parse_directory(src_bytes.span(), Limits{});
  auto lz = std::make_shared<modelzip::zip::LibzipArchive>(src_bytes);
  auto path = dir / "copy.zip";
  {
    modelzip::zip::ZipWriter w(path);
    w.add_stored("first", {Bytes::copy_of(std::string("1"))});
    w.add_raw_copy("renamed.bin", lz, sd.entries[0]);
    w.close(nullptr);
  }
  Bytes mapped = io::map_file(path);
  modelzip::zip::Directory d = modelzip::zip::parse_directory(mapped.span(), Limits{});
  REQUIRE(d.entries.size() == 2);
  const auto& e = d.entries[1];
  CHECK(e.name == "renamed.bin");
  CHECK(e.crc32 == sd.entries[0].crc32);
  CHECK(e.compressed_size == sd.entries[0].compressed_size);
  CHECK(mapped.as_string_view().substr(e.data_offset, e.compressed_size) ==
        std::string_view(src.bytes).substr(src.data_offsets[0], e.compressed_size));
  CHECK(text(modelzip::zip::EntryReader(mapped, Limits{}).read(e, true)) == content);
}

TEST_CASE("The same entries give the same bytes (fixed times, fixed order)") {
  TempDir dir;
  auto write = [&](const std::string& name) {
    modelzip::zip::ZipWriter w(dir / name);
    w.add_stored("b", {Bytes::copy_of(pattern(100, 1))});
    w.add_deflated("c", {Bytes::copy_of(pattern(1000, 2))});
    w.add_stored("a", {Bytes::copy_of(pattern(10, 3))});
    w.close(nullptr);
    return io_bytes(dir / name);
  };
  std::string one = write("1.zip"), two = write("2.zip");
  CHECK(one.size() > 0);
  CHECK(one == two);
  // Stored entries come first, in the order added; then deflated ones.
  Bytes b = Bytes::copy_of(one);
  modelzip::zip::Directory d = modelzip::zip::parse_directory(b.span(), Limits{});
  REQUIRE(d.entries.size() == 3);
  CHECK(d.entries[0].name == "b");
  CHECK(d.entries[1].name == "a");
  CHECK(d.entries[2].name == "c");
}

TEST_CASE("close() refuses to overwrite an existing file and cancels on request") {
  TempDir dir;
  write_file(dir / "exists.zip", "not mine");
  {
    modelzip::zip::ZipWriter w(dir / "exists.zip");
    w.add_stored("a", {Bytes::copy_of(std::string("x"))});
    REQUIRE_ERROR_AS(err, w.close(nullptr), ErrorCode::io, "cannot create archive");
    CHECK(err.context().archive == (dir / "exists.zip").string());
  }
  CHECK(io_bytes(dir / "exists.zip") == "not mine");
  {
    modelzip::zip::ZipWriter w(dir / "missing-folder" / "x.zip");
    w.add_stored("a", {Bytes::copy_of(std::string("x"))});
    CHECK_ERROR(w.close(nullptr), ErrorCode::io, "");
  }
  {
    modelzip::zip::ZipWriter w(dir / "cancelled.zip");
    w.add_stored("a", {Bytes::copy_of(pattern(4 << 20, 5))});
    w.add_deflated("b", {Bytes::copy_of(pattern(4 << 20, 6))});
    int calls = 0;
    CHECK_ERROR(w.close([&](std::uint64_t, std::uint64_t) { return ++calls < 3; }),
                ErrorCode::cancelled, "save cancelled");
    CHECK(calls >= 3);
  }
  CHECK_FALSE(std::filesystem::exists(dir / "cancelled.zip"));
  // libzip's own temporary file is gone too.
  for (const auto& f : std::filesystem::directory_iterator(dir.path()))
    CHECK(f.path().filename().string().rfind("cancelled.zip", 0) != 0);
}

TEST_CASE("unzip accepts the archives (padding extra fields included)") {
  if (std::system("command -v unzip >/dev/null 2>&1") != 0)
    FAIL("unzip is not installed (tests need it: see .ci/install-deps)");
  TempDir dir;
  auto path = dir / "t.zip";
  {
    modelzip::zip::ZipWriter w(path);
    for (int i = 1; i < 70; ++i)
      w.add_stored(std::string(static_cast<std::size_t>(i), 'x') + ".bin",
                   {Bytes::copy_of(pattern(static_cast<std::size_t>(i) * 11, i))});
    w.add_deflated("d.txt", {Bytes::copy_of(pattern(10000, 1))});
    w.close(nullptr);
  }
  std::string cmd = "unzip -tqq '" + path.string() + "' >/dev/null 2>&1";
  CHECK(std::system(cmd.c_str()) == 0);
}
