// io/mapped_file: mapping, reading, lifetimes and errors.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "../zip/expect_error.hpp"
#include "io/mapped_file.hpp"
#include "modelzip/error.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;
namespace fs = std::filesystem;

TEST_CASE("map_file: the file's bytes, zero-copy, alive as long as a view lives") {
  TempDir dir;
  std::string content(100000, '\0');
  for (std::size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i % 251);
  write_file(dir / "f", content);
  Bytes tail;
  {
    Bytes m = io::map_file(dir / "f");
    CHECK(m.is_mapped());
    CHECK(m.size() == content.size());
    CHECK(m.as_string_view() == content);
    tail = m.slice(99990, 10);
    CHECK(tail.is_mapped());
    io::advise(m, io::Access::sequential);
    io::advise(m.slice(4097, 5000), io::Access::random);  // unaligned range
    io::advise(m, io::Access::will_need);
    io::advise(m, io::Access::normal);
  }
  // The mapping outlives the Bytes it came from, and the file itself.
  fs::remove(dir / "f");
  CHECK(tail.as_string_view() == content.substr(99990, 10));
  Bytes owned = tail.to_owned();
  CHECK_FALSE(owned.is_mapped());
  io::advise(owned, io::Access::sequential);  // no-op for unmapped bytes
}

TEST_CASE("map_file / read_file: an empty file is empty bytes") {
  TempDir dir;
  write_file(dir / "empty", "");
  CHECK(io::map_file(dir / "empty").empty());
  CHECK(io::read_file(dir / "empty").empty());
  io::advise(io::map_file(dir / "empty"), io::Access::normal);
}

TEST_CASE("read_file: owned bytes") {
  TempDir dir;
  write_file(dir / "f", "some bytes\0with nul");
  Bytes b = io::read_file(dir / "f");
  CHECK_FALSE(b.is_mapped());
  CHECK(b.as_string_view() == "some bytes");  // write_file stops at the C string's NUL
}

TEST_CASE("map_file / read_file: missing files and folders are Error(io) naming the path") {
  TempDir dir;
  REQUIRE_ERROR_AS(e1, io::map_file(dir / "missing"), ErrorCode::io, "cannot open");
  CHECK(e1.context().archive == (dir / "missing").string());
  CHECK_ERROR(io::read_file(dir / "missing"), ErrorCode::io, "cannot open");
  REQUIRE_ERROR_AS(e2, io::map_file(dir.path()), ErrorCode::io, "is a folder, not a file");
  CHECK(e2.context().archive == dir.path().string());
  CHECK_ERROR(io::read_file(dir.path()), ErrorCode::io, "");
}

TEST_CASE("map_private_writable: any range, writable, writes never reach the file") {
  TempDir dir;
  std::string content(3 * 4096 + 100, '\0');
  for (std::size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i % 253);
  write_file(dir / "f", content);
  const int fd = ::open((dir / "f").c_str(), O_RDONLY | O_CLOEXEC);  // read-only is enough
  REQUIRE(fd >= 0);
  Bytes a = io::map_private_writable(fd, 4097, 5000, "f");  // starts inside a page
  Bytes b = io::map_private_writable(fd, 4097, 5000, "f");
  ::close(fd);  // the mappings stay
  CHECK(a.is_mapped());
  REQUIRE(a.size() == 5000);
  CHECK(a.as_string_view() == content.substr(4097, 5000));
  auto* writable = const_cast<std::byte*>(a.data());
  std::memset(writable, 'x', a.size());
  CHECK(a.as_string_view() == std::string(5000, 'x'));
  CHECK(b.as_string_view() == content.substr(4097, 5000));  // another mapping: not seen
  CHECK(io_bytes(dir / "f") == content);
  CHECK(io::map_private_writable(-1, 0, 0, "f").empty());  // nothing to map
  CHECK_THROWS_AS(io::map_private_writable(-1, 0, 10, "f"), Error);
}
