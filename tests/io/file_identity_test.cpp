// io::identity_of: equal for an untouched file, different after any write,
// truncation, same-size rewrite or replacement by rename; nullopt when the
// file is missing.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>

#include "io/file_identity.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;

TEST_CASE("A file's identity changes with every change to it, and only then") {
  TempDir dir;
  const auto path = dir / "f";
  CHECK_FALSE(io::identity_of(path).has_value());
  write_file(path, "hello");
  const auto first = io::identity_of(path);
  REQUIRE(first.has_value());
  CHECK(first->size == 5);
  CHECK(io::identity_of(path) == first);
  (void)io_bytes(path);  // reading changes nothing
  CHECK(io::identity_of(path) == first);

  auto changed_by = [&](const char* what, auto&& change) {
    INFO(what);
    const auto before = io::identity_of(path);
    change();
    const auto after = io::identity_of(path);
    CHECK(after.has_value());
    CHECK(after != before);
  };
  changed_by("same-size write in place", [&] {
    int fd = ::open(path.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    CHECK(::pwrite(fd, "J", 1, 0) == 1);
    ::close(fd);
  });
  changed_by("rewrite with identical bytes", [&] {
    int fd = ::open(path.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    CHECK(::pwrite(fd, "J", 1, 0) == 1);
    ::close(fd);
  });
  changed_by("append", [&] {
    int fd = ::open(path.c_str(), O_WRONLY | O_APPEND);
    REQUIRE(fd >= 0);
    CHECK(::write(fd, "!", 1) == 1);
    ::close(fd);
  });
  changed_by("truncate", [&] { std::filesystem::resize_file(path, 2); });
  changed_by("replaced by rename", [&] {
    write_file(dir / "g", "He");
    std::filesystem::rename(dir / "g", path);
  });
  std::filesystem::remove(path);
  CHECK_FALSE(io::identity_of(path).has_value());
}
