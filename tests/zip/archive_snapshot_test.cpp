// read_snapshot (FORMAT.md 8.3): one bounded loop of attempts, each the
// reader protocol, the caller's parse (`use`) and the check that the
// snapshot is still current. The archive is changed from within `use`, so
// every attempt's outcome is known: a change there always makes the check
// fail.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <string>

#include "expect_error.hpp"
#include "io/append_journal.hpp"
#include "test_support.hpp"
#include "zip/archive_snapshot.hpp"
#include "zip_builder.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

// A small archive whose last entry is tags.txt, as modelzip writes them.
BuiltZip write_archive(const std::filesystem::path& path) {
  BuiltZip zip =
      build_zip({.entries = {stored("metadata.toml", "format = 1\n"), stored("tags.txt", "t1\n")}});
  write_file(path, zip.bytes);
  return zip;
}

// Gives the file a modification time of its own (and a new change time),
// as a writer that commits does.
void touch(const std::filesystem::path& path, int n) {
  const struct timespec times[2] = {{0, UTIME_OMIT}, {1000000 + n, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

}  // namespace

TEST_CASE("A stable archive is read in one attempt, its directory parsed by the protocol") {
  TempDir dir;
  const auto path = dir / "m.zip";
  const BuiltZip zip = write_archive(path);
  int calls = 0;
  zip::read_snapshot(path, "tags.txt", Limits{}, [&](zip::Snapshot& s) {
    ++calls;
    CHECK(s.bytes.as_string_view() == zip.bytes);
    REQUIRE(s.directory.has_value());
    CHECK(s.directory->entries.size() == 2);
    CHECK(s.file.identity.has_value());
    CHECK(s.file.stable_prefix == zip.local_offsets[1]);  // tags.txt's local header
  });
  CHECK(calls == 1);
}

TEST_CASE("An archive that changes during the first k attempts is read in k + 1 attempts") {
  TempDir dir;
  const auto path = dir / "m.zip";
  write_archive(path);
  for (int k : {1, 3, zip::kSnapshotAttempts - 1}) {
    CAPTURE(k);
    int calls = 0;
    zip::SnapshotFile kept;
    zip::read_snapshot(path, "tags.txt", Limits{}, [&](zip::Snapshot& s) {
      if (++calls <= k) touch(path, k * 1000 + calls);
      kept = std::move(s.file);
    });
    CHECK(calls == k + 1);
    CHECK(zip::snapshot_current(path, kept));  // the last call's snapshot is the result
  }
}

TEST_CASE("A journal that comes and goes during the first attempts is read again") {
  // With a valid journal the snapshot is the journal's previous archive,
  // current for as long as that journal is there; the file's identity does
  // not count.
  TempDir dir;
  const auto path = dir / "m.zip";
  const BuiltZip zip = write_archive(path);
  const io::AppendJournal journal{
      7, zip.cd_offset, zip.bytes.size(),
      Bytes::copy_of(std::string_view(zip.bytes).substr(zip.cd_offset))};
  int calls = 0;
  zip::read_snapshot(path, "tags.txt", Limits{}, [&](zip::Snapshot& s) {
    ++calls;
    if (calls == 1) {
      CHECK(s.file.journal.kind == io::JournalState::Kind::absent);
      io::write_append_journal(path, journal, false);  // an append begins
    } else if (calls == 2) {
      CHECK(s.file.journal.kind == io::JournalState::Kind::valid);
      CHECK_FALSE(s.directory.has_value());
      io::remove_append_journal(path, false);  // and commits
    } else {
      CHECK(s.file.journal.kind == io::JournalState::Kind::absent);
    }
  });
  CHECK(calls == 3);
}

TEST_CASE("An archive that changes during every attempt gives up after exactly the limit") {
  // FORMAT.md 8.3 step 5: 50 attempts in all, counting those whose check
  // after the caller's parse failed.
  CHECK(zip::kSnapshotAttempts == 50);
  TempDir dir;
  const auto path = dir / "m.zip";
  write_archive(path);
  int calls = 0;
  REQUIRE_ERROR_AS(
      err,
      zip::read_snapshot(path, "tags.txt", Limits{}, [&](zip::Snapshot&) { touch(path, ++calls); }),
      ErrorCode::io, "the archive kept changing while it was being opened");
  CHECK(calls == zip::kSnapshotAttempts);
  CHECK(err.context().archive == path.string());
  CHECK(std::string(err.what())
            .find("its append journal (0 times) or the file's size or times "
                  "(50 times) changed") != std::string::npos);
}

TEST_CASE("The caller's Error counts only for a snapshot that is still current") {
  TempDir dir;
  const auto path = dir / "m.zip";
  write_archive(path);
  SUBCASE("a parse that failed while the archive changed is done again") {
    int calls = 0;
    zip::read_snapshot(path, "tags.txt", Limits{}, [&](zip::Snapshot&) {
      if (++calls == 1) {
        touch(path, 1);
        throw Error(ErrorCode::corrupt, "overwritten under the parse");
      }
    });
    CHECK(calls == 2);
  }
  SUBCASE("a parse that failed on a stable archive is the error, in one attempt") {
    int calls = 0;
    REQUIRE_ERROR_AS(err,
                     zip::read_snapshot(path, "tags.txt", Limits{},
                                        [&](zip::Snapshot&) {
                                          ++calls;
                                          throw Error(ErrorCode::corrupt, "damaged table");
                                        }),
                     ErrorCode::corrupt, "damaged table");
    CHECK(calls == 1);
  }
}
