// io/append_journal: the journal's name, round trip, and that anything
// malformed reads as "no journal".
#include <doctest/doctest.h>

#include "../zip/expect_error.hpp"
#include "io/append_journal.hpp"
#include "modelzip/error.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;
namespace fs = std::filesystem;

TEST_CASE("Append journal: name, write, read, remove") {
  TempDir dir;
  auto archive = dir / "m.zip";
  CHECK(io::append_journal_path(archive) == dir / ".m.zip.modelzip-append");
  CHECK_FALSE(io::read_append_journal(archive).has_value());
  io::write_append_journal(archive, 12345);
  CHECK(io_bytes(dir / ".m.zip.modelzip-append") == "modelzip-append v1 12345\n");
  CHECK(io::read_append_journal(archive) == 12345u);
  io::write_append_journal(archive, 18446744073709551615ull);
  CHECK(io::read_append_journal(archive) == 18446744073709551615ull);
  io::remove_append_journal(archive, true);
  CHECK_FALSE(fs::exists(io::append_journal_path(archive)));
  io::remove_append_journal(archive, false);  // already gone: fine
}

TEST_CASE("Append journal: malformed contents read as no journal") {
  TempDir dir;
  auto archive = dir / "m.zip";
  for (std::string text :
       {"", "modelzip-append v1 \n", "modelzip-append v1 12", "modelzip-append v1 12x\n",
        "modelzip-append v2 12\n", "modelzip-append v1 -1\n", "modelzip-append v1 +1\n",
        "modelzip-append v1 99999999999999999999\n", "modelzip-append v1 1 2\n", "garbage"}) {
    INFO("journal '" << text << "'");
    write_file(io::append_journal_path(archive), text);
    CHECK_FALSE(io::read_append_journal(archive).has_value());
  }
  // A folder in place of the journal.
  fs::remove(io::append_journal_path(archive));
  fs::create_directory(io::append_journal_path(archive));
  CHECK_FALSE(io::read_append_journal(archive).has_value());
}

TEST_CASE("Append journal: a missing folder is an Error(io)") {
  TempDir dir;
  CHECK_ERROR(io::write_append_journal(dir / "missing" / "m.zip", 1), ErrorCode::io,
              "cannot create the append journal");
}
