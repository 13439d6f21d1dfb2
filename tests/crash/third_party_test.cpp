// What zip tools that know nothing of modelzip's journal see between a
// killed append and the next writer (FORMAT.md section 8.1): the append of
// the crash scenarios is killed before each of its system calls, and every
// archive left behind (the file alone, as `cp` or a web server would hand
// it out) is read by Python's zipfile and `unzip -t`, neither of which may
// fail: each must find the old tags, or the new ones once the new end
// records are in place (from the writer's final cut of the file on:
// modelzip itself, and the next writer, keep the old archive until the
// journal is removed). Java's streaming ZipInputStream (when installed)
// must read them too where FORMAT.md section 8.1 says streaming readers
// can: the old tags until the append's first write at the old tail (the
// old tags.txt header is still there), the new ones once the file has its
// new size; in between (the window of streaming readers) its results are
// reported only (tests/crash/zip_readers.py --java-strict).
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>

#include "checkpoint/archive_impl.hpp"
#include "io/append_journal.hpp"
#include "scenarios.hpp"

using namespace modelzip;
using namespace modelzip::crash;
using modelzip::testing::TempDir;

TEST_CASE("Kill trials: between a killed append and the next writer, zip tools read the archive") {
  const char* tests_dir = std::getenv("MODELZIP_TESTS_DIR");
  if (tests_dir == nullptr || std::system("python3 -c '' 2>/dev/null") != 0) {
    MESSAGE("not run: needs MODELZIP_TESTS_DIR (meson test) and python3");
    return;
  }
  TempDir dir, out;
  const Scenario s = make_scenario(ScenarioKind::append_add, dir.path());
  const fs::path path = dir / "m.zip";
  reset_folder(dir.path(), path, s.old_bytes);
  // The old tags.txt header, which the append's first write at the old
  // tail overwrites.
  const std::uint64_t tail =
      Archive::Impl::of(Archive::open(path)).find_entry("tags.txt")->local_header_offset;
  const std::string old_header = s.old_bytes.substr(tail, 38);
  std::uint64_t total = 0;
  REQUIRE(exited_ok(commit_in_child(s, path, {}, &total)));
  const std::uint64_t new_size = fs::file_size(path);
  std::ofstream manifest(out / "manifest.txt");
  int with_journal = 0;
  for (std::uint64_t n = 1; n <= total; ++n) {
    reset_folder(dir.path(), path, s.old_bytes);
    REQUIRE(killed(commit_in_child(
        s, path, {.action = io::FaultInjector::Action::kill, .any_kind = true, .nth = n})));
    const bool journal = fs::exists(io::append_journal_path(path));
    with_journal += journal;
    // The new end records are at the end of the file once it has the new
    // size (before that, a copy of the old tail lies beyond the new data;
    // before the append began, the file is the old archive, shorter).
    const bool cut = fs::file_size(path) == new_size;
    const fs::path copy = out / ("kill-before-call-" + std::to_string(n) + ".zip");
    fs::copy_file(path, copy);
    manifest << copy.string();
    for (const auto& t : names_of(cut ? s.new_model : s.old_model)) manifest << ' ' << t;
    const bool tail_overwritten = testing::io_bytes(path).substr(tail, 38) != old_header;
    if (tail_overwritten && !cut) manifest << " | -";  // streaming readers: not guaranteed
    manifest << '\n';
  }
  manifest.close();
  CHECK(with_journal > 10);  // the kills landed inside the append
  const std::string command = "python3 " + std::string(tests_dir) + "/crash/zip_readers.py " +
                              (out / "manifest.txt").string() + " --java-strict > " +
                              (out / "report.txt").string() + " 2>&1";
  const int status = std::system(command.c_str());
  const std::string report = testing::io_bytes(out / "report.txt");
  MESSAGE(report);
  CHECK(status == 0);
}
