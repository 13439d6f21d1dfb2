// Free ranges (zip/free_range.hpp): gaps, free entry names, and headers
// whose CRC-32, derived from the CRCs of the entries in the range, equals
// zlib's CRC of the bytes that follow the header.
#include <doctest/doctest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "modelzip/error.hpp"
#include "zip/free_range.hpp"
#include "zip/zip_stream_writer.hpp"

using namespace modelzip;
using namespace modelzip::zip;

namespace {

std::span<const std::byte> span_of(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

std::uint32_t zlib_crc(const std::string& s, std::size_t from, std::size_t n) {
  return static_cast<std::uint32_t>(
      ::crc32(0, reinterpret_cast<const Bytef*>(s.data() + from), static_cast<uInt>(n)));
}

// A local header + data (stored, or deflated with zlib) as an archive holds them.
std::string entry(const std::string& name, const std::string& data, bool deflate,
                  std::uint64_t offset) {
  std::string body = data;
  if (deflate) {
    z_stream z{};
    REQUIRE(::deflateInit2(&z, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    body.assign(::deflateBound(&z, data.size()), '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z.avail_in = static_cast<uInt>(data.size());
    z.next_out = reinterpret_cast<Bytef*>(body.data());
    z.avail_out = static_cast<uInt>(body.size());
    REQUIRE(::deflate(&z, Z_FINISH) == Z_STREAM_END);
    body.resize(z.total_out);
    ::deflateEnd(&z);
  }
  const auto header =
      encode_local_header(LocalHeader{.name = name,
                                      .method = deflate ? kMethodDeflate : kMethodStore,
                                      .crc = zlib_crc(data, 0, data.size()),
                                      .compressed = body.size(),
                                      .uncompressed = data.size()},
                          offset, !deflate);
  return std::string(reinterpret_cast<const char*>(header.data()), header.size()) + body;
}

std::uint32_t le32(const std::string& s, std::size_t at) {
  std::uint32_t v = 0;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}

}  // namespace

TEST_CASE("gaps_between lists what no range covers, in file order") {
  CHECK(gaps_between({}, 10) == std::vector<ByteRange>{{0, 10}});
  CHECK(gaps_between({{5, 3}, {0, 2}, {20, 5}}, 22) == std::vector<ByteRange>{{2, 3}, {8, 12}});
  CHECK(gaps_between({{0, 4}, {4, 6}}, 10).empty());
  CHECK(gaps_between({{0, 4}, {30, 6}}, 10) == std::vector<ByteRange>{{4, 6}});
}

TEST_CASE("Free entry names carry the offset and are cut to fit short ranges") {
  CHECK(free_entry_name({1234, 1000}) == ".modelzip-free/1234");
  CHECK(free_entry_name({1234, 35}) == ".mode");
  CHECK(free_entry_name({1234, kMinFreeRange}) == ".m");
}

TEST_CASE("A free entry's header covers the range with the CRC of the bytes after it") {
  std::mt19937_64 rng(11);
  std::string range;
  const std::uint64_t base = 4096;  // where the range lies in the file
  std::string stored(300000, '\0'), text(5000, 'a');
  for (auto& c : stored) c = static_cast<char>(rng());
  for (std::size_t i = 0; i < text.size(); i += 7) text[i] = static_cast<char>('a' + i % 26);
  range += entry("t0/params.txt", "w 0\n", false, base + range.size());
  range += entry("t0/params/0.fb", stored, false, base + range.size());
  range += entry("t0/notes.txt", text, true, base + range.size());
  range += "PK\x07\x08 a data descriptor";  // no header describes these: read
  range += entry("t0/params/1.fb", "tail", false, base + range.size());
  const std::string file = std::string(base, 'x') + range;
  const ByteRange r{base, range.size()};

  CHECK(is_freed_range(span_of(file), r));
  CHECK_FALSE(is_free_entry(span_of(file), r));
  const std::vector<std::byte> header = free_entry_header(span_of(file), r);
  const std::string name = ".modelzip-free/4096";
  REQUIRE(header.size() == 30 + name.size());
  std::string formatted = file;
  std::memcpy(formatted.data() + base, header.data(), header.size());
  CHECK(le32(formatted, base) == 0x04034b50);
  CHECK(formatted.substr(base + 30, name.size()) == name);
  const std::size_t data = base + header.size();
  CHECK(le32(formatted, base + 18) == formatted.size() - data);  // sizes end it at the range's end
  CHECK(le32(formatted, base + 14) == zlib_crc(formatted, data, formatted.size() - data));
  CHECK(is_free_entry(span_of(formatted), r));
  CHECK_FALSE(is_free_entry(span_of(formatted), ByteRange{base, range.size() - 1}));
  CHECK_FALSE(is_free_entry(span_of(formatted), ByteRange{base + 1, range.size() - 1}));
  // A formatted range formatted again (merged into a larger one) keeps a correct CRC.
  const std::string more = formatted + entry("t1/params.txt", "x 1\n", false, formatted.size());
  const ByteRange merged{base, more.size() - base};
  const std::vector<std::byte> again = free_entry_header(span_of(more), merged);
  std::string reformatted = more;
  std::memcpy(reformatted.data() + base, again.data(), again.size());
  const std::size_t data2 = base + again.size();
  CHECK(le32(reformatted, base + 14) == zlib_crc(reformatted, data2, reformatted.size() - data2));
}

TEST_CASE("Only gaps that start with a local header are freed ranges") {
  const std::string file =
      std::string("PK\x03\x04", 4) + std::string(60, 'z') + "JUNK" + std::string(60, 'z');
  CHECK(is_freed_range(span_of(file), {0, 64}));
  CHECK_FALSE(is_freed_range(span_of(file), {0, kMinFreeRange - 1}));  // too short
  CHECK_FALSE(is_freed_range(span_of(file), {64, 64}));                // another tool's bytes
  CHECK_FALSE(is_freed_range(span_of(file), {64, 65}));                // beyond the file
  CHECK_THROWS_AS(free_entry_header(span_of(file), {0, 10}), Error);
}

TEST_CASE("format_free_ranges writes each unformatted freed range's header once") {
  char path[] = "/tmp/modelzip-free-range-XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  std::string file = entry("a/x", std::string(100, 'q'), false, 0);
  file += entry("a/y", std::string(100, 'r'), false, file.size());
  REQUIRE(::pwrite(fd, file.data(), file.size(), 0) == static_cast<ssize_t>(file.size()));
  const ByteRange whole{0, file.size()};
  CHECK(format_free_ranges(fd, path, span_of(file), {whole, {file.size(), 0}}) ==
        30 + std::string(".modelzip-free/0").size());
  std::string now(file.size(), '\0');
  REQUIRE(::pread(fd, now.data(), now.size(), 0) == static_cast<ssize_t>(now.size()));
  CHECK(is_free_entry(span_of(now), whole));
  CHECK(format_free_ranges(fd, path, span_of(now), {whole}) == 0);
  ::close(fd);
  ::unlink(path);
}
