// io/append_journal: the journal's name and byte layout (built here by hand
// from FORMAT.md section 8.2), round trip, and that anything malformed reads
// as a torn journal.
#include <doctest/doctest.h>
#include <zlib.h>

#include "../zip/expect_error.hpp"
#include "io/append_journal.hpp"
#include "modelzip/error.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;
namespace fs = std::filesystem;
using Kind = io::JournalState::Kind;

namespace {

std::string le64(std::uint64_t v) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return out;
}

// The journal's bytes as FORMAT.md section 8.2 lays them out (version 3,
// or version 2 without the tag list).
std::string journal_bytes(std::uint64_t nonce, std::uint64_t tail_start, const std::string& tail,
                          const std::string& tags = "", int version = 3) {
  std::string out = "modelzip-append v" + std::to_string(version) + "\n" + le64(nonce) +
                    le64(tail_start) + le64(tail_start + tail.size()) +
                    (version == 3 ? le64(tags.size()) + tags : "") + tail;
  const auto crc = static_cast<std::uint32_t>(
      ::crc32(0, reinterpret_cast<const Bytef*>(out.data()), static_cast<uInt>(out.size())));
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((crc >> (8 * i)) & 0xFF));
  return out;
}

}  // namespace

TEST_CASE("Append journal: name, byte layout, read, remove") {
  TempDir dir;
  auto archive = dir / "m.zip";
  CHECK(io::append_journal_path(archive) == dir / ".m.zip.modelzip-append");
  CHECK(io::read_append_journal(archive).kind == Kind::absent);
  const std::string tail = std::string("PK\x03\x04tail bytes\0\xff", 16);
  io::write_append_journal(
      archive, {0x1122334455667788ull, 1000, 1000 + tail.size(), Bytes::copy_of(tail)}, true);
  CHECK(io_bytes(dir / ".m.zip.modelzip-append") ==
        journal_bytes(0x1122334455667788ull, 1000, tail));
  io::JournalState s = io::read_append_journal(archive);
  REQUIRE(s.kind == Kind::valid);
  CHECK(s.journal.nonce == 0x1122334455667788ull);
  CHECK(s.journal.tail_start == 1000);
  CHECK(s.journal.old_size == 1000 + tail.size());
  CHECK(s.journal.tail.as_string_view() == tail);
  CHECK(s.same_as(io::read_append_journal(archive)));
  // An existing journal is never overwritten.
  CHECK_ERROR(io::write_append_journal(archive, {1, 5, 5, Bytes()}, false), ErrorCode::io,
              "cannot create the append journal");
  io::remove_append_journal(archive, true);
  CHECK_FALSE(fs::exists(io::append_journal_path(archive)));
  io::remove_append_journal(archive, false);  // already gone: fine
  // An empty tail, a new nonce: a different journal for the reader protocol.
  io::write_append_journal(archive, {io::new_journal_nonce(), 7, 7, Bytes()}, false);
  CHECK(io::read_append_journal(archive).kind == Kind::valid);
  CHECK_FALSE(io::read_append_journal(archive).same_as(s));
}

TEST_CASE("Append journal: the tags being saved; version 2 journals have none") {
  TempDir dir;
  auto archive = dir / "m.zip";
  io::AppendJournal j{9, 40, 43, Bytes::copy_of(std::string("abc"))};
  j.tags = {"step-7", "caf\xc3\xa9"};
  io::write_append_journal(archive, j, false);
  CHECK(io_bytes(io::append_journal_path(archive)) ==
        journal_bytes(9, 40, "abc", "step-7\ncaf\xc3\xa9\n"));
  io::JournalState s = io::read_append_journal(archive);
  REQUIRE(s.kind == Kind::valid);
  CHECK(s.journal.tags == std::vector<std::string>{"step-7", "caf\xc3\xa9"});
  CHECK(s.journal.tail.as_string_view() == "abc");
  io::remove_append_journal(archive, false);
  // A tag list that does not end with a line break, or longer than the
  // file: torn.
  for (const std::string& bad : {journal_bytes(9, 40, "abc", "step-7"),
                                 journal_bytes(9, 40, "abc", "step-7\n").replace(43, 1, "\x20")}) {
    write_file(io::append_journal_path(archive), bad);
    CHECK(io::read_append_journal(archive).kind == Kind::torn);
  }
  write_file(io::append_journal_path(archive), journal_bytes(5, 10, "xyz", "", 2));
  s = io::read_append_journal(archive);
  REQUIRE(s.kind == Kind::valid);
  CHECK(s.journal.tags.empty());
  CHECK(s.journal.tail.as_string_view() == "xyz");
  CHECK_ERROR(io::encode_append_journal(io::AppendJournal{1, 0, 0, Bytes(), {"a\nb"}}),
              ErrorCode::invalid_argument, "line break");
}

TEST_CASE("Append journal: the version 1 journal of modelzip 0.1.0 reads as an empty tail") {
  TempDir dir;
  auto archive = dir / "m.zip";
  write_file(io::append_journal_path(archive), "modelzip-append v1 12345\n");
  io::JournalState s = io::read_append_journal(archive);
  REQUIRE(s.kind == Kind::valid);
  CHECK(s.journal.tail_start == 12345);
  CHECK(s.journal.old_size == 12345);
  CHECK(s.journal.tail.empty());
}

TEST_CASE("Append journal: torn or malformed contents read as torn") {
  TempDir dir;
  auto archive = dir / "m.zip";
  const std::string good = journal_bytes(42, 100, "0123456789");
  std::string bad_crc = good;
  bad_crc[25] ^= 1;  // a bit of the nonce: the CRC no longer matches
  std::string bad_tail = good;
  bad_tail[50] ^= 0x40;  // a byte of the saved tail
  std::string size_mismatch = journal_bytes(42, 100, "0123456789");
  size_mismatch[35] = 120;  // old_size 120, but 10 tail bytes (CRC fixed below)
  {
    std::string body = size_mismatch.substr(0, size_mismatch.size() - 4);
    const auto crc = static_cast<std::uint32_t>(
        ::crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size())));
    for (int i = 0; i < 4; ++i) body.push_back(static_cast<char>((crc >> (8 * i)) & 0xFF));
    size_mismatch = body;
  }
  for (std::string text :
       {std::string(), good.substr(0, 19), good.substr(0, good.size() - 1), good + "x", bad_crc,
        bad_tail, size_mismatch, std::string("modelzip-append v1 \n"),
        std::string("modelzip-append v1 12"), std::string("modelzip-append v1 12x\n"),
        std::string("modelzip-append v4\n") + good.substr(19), std::string("garbage")}) {
    INFO("journal of " << text.size() << " bytes");
    write_file(io::append_journal_path(archive), text);
    CHECK(io::read_append_journal(archive).kind == Kind::torn);
  }
  write_file(io::append_journal_path(archive), good);
  CHECK(io::read_append_journal(archive).kind == Kind::valid);
  // A folder in place of the journal.
  fs::remove(io::append_journal_path(archive));
  fs::create_directory(io::append_journal_path(archive));
  CHECK(io::read_append_journal(archive).kind == Kind::torn);
}

TEST_CASE("Append journal: a missing folder is an Error(io)") {
  TempDir dir;
  CHECK_ERROR(io::write_append_journal(dir / "missing" / "m.zip", {1, 1, 1, Bytes()}, true),
              ErrorCode::io, "cannot create the append journal");
}
