// The next writer after a killed append says that it rolled the save back
// (FORMAT.md section 8.2): "rolled back an interrupted save of tag X",
// through WriterOptions::on_notice in C++, on the CLI's stderr (`modelzip
// rm-tag` and `modelzip import` as next writers) and as a Python
// UserWarning (pytest.warns). The interrupted saves are real: the append of
// the crash scenarios, SIGKILLed before one of its system calls
// (scenarios.hpp), at the first, a middle and the last call that leaves
// a valid journal behind. A writer that finds no journal, or a torn one
// (killed while writing it: the archive was not touched yet), says nothing.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>

#include "io/append_journal.hpp"
#include "scenarios.hpp"

using namespace modelzip;
using namespace modelzip::crash;
using modelzip::testing::TempDir;

namespace {

const std::string kNotice = "rolled back an interrupted save of tag new";

// The archive and its journal as a kill left them.
struct Leftover {
  std::uint64_t call = 0;
  std::string archive, journal;
};

void restore(const TempDir& dir, const Leftover& l) {
  const fs::path path = dir / "m.zip";
  reset_folder(dir.path(), path, l.archive);
  testing::write_file(io::append_journal_path(path), l.journal);
}

// A float32 vector of 3 ones as a .npy file (format 1.0).
void write_npy(const fs::path& path) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  const float one = 1.0f;
  for (int i = 0; i < 3; ++i) out.append(reinterpret_cast<const char*>(&one), sizeof one);
  testing::write_file(path, out);
}

// Runs `command` (stdout and stderr into `log`); its exit status.
int run(const std::string& command, const fs::path& log) {
  return std::system((command + " > " + log.string() + " 2>&1").c_str());
}

std::vector<std::string> tags_of(const fs::path& path) {
  return Archive::open(path).tags();
}

}  // namespace

TEST_CASE("The next writer after a killed append says it rolled the save back") {
  const char* build_dir = std::getenv("MODELZIP_BUILD_DIR");
  TempDir dir, scratch;
  const Scenario s = make_scenario(ScenarioKind::append_add, dir.path());
  const fs::path path = dir / "m.zip";
  const fs::path journal = io::append_journal_path(path);
  reset_folder(dir.path(), path, s.old_bytes);
  std::uint64_t total = 0;
  REQUIRE(exited_ok(commit_in_child(s, path, {}, &total)));

  // Every kill that leaves a valid journal; the first, a middle and the last.
  std::vector<Leftover> all, torn;
  for (std::uint64_t n = 1; n <= total; ++n) {
    reset_folder(dir.path(), path, s.old_bytes);
    REQUIRE(killed(commit_in_child(
        s, path, {.action = io::FaultInjector::Action::kill, .any_kind = true, .nth = n})));
    if (!fs::exists(journal)) continue;
    const bool valid = io::read_append_journal(path).kind == io::JournalState::Kind::valid;
    (valid ? all : torn).push_back({n, testing::io_bytes(path), testing::io_bytes(journal)});
  }
  REQUIRE(all.size() > 10);
  const std::vector<Leftover> picked = {all.front(), all[all.size() / 2], all.back()};
  const std::vector<std::string> old_tags = names_of(s.old_model);
  auto notices_of_next_writer = [&](std::vector<std::string>* notices) {
    Writer w = Writer::open(
        path, WriterOptions{.durable = false, .on_notice = [notices](const std::string& n) {
                              notices->push_back(n);
                            }});
    NewTag next;
    next.add("y", bytes_tensor("y"));
    w.add_tag("next", std::move(next));
    w.commit();
  };
  for (const Leftover& l : torn) {
    INFO("killed before call " << l.call << " of " << total << ": a torn journal");
    restore(dir, l);
    std::vector<std::string> notices;
    notices_of_next_writer(&notices);
    CHECK(notices.empty());
    CHECK(!fs::exists(journal));
  }

  for (const Leftover& l : picked) {
    INFO("killed before call " << l.call << " of " << total);
    {
      INFO("C++: WriterOptions::on_notice");
      restore(dir, l);
      std::vector<std::string> notices;
      notices_of_next_writer(&notices);
      CHECK(notices == std::vector<std::string>{kNotice});
      std::vector<std::string> expected = old_tags;
      expected.push_back("next");
      CHECK(tags_of(path) == expected);
      CHECK(!fs::exists(journal));
      // Nothing to roll back: nothing said.
      Writer again = Writer::open(
          path, WriterOptions{.durable = false,
                              .on_notice = [&](const std::string& n) { notices.push_back(n); }});
      again.remove_tag("next");
      again.commit();
      CHECK(notices.size() == 1);
    }
    if (build_dir == nullptr) continue;
    const std::string cli = std::string(build_dir) + "/src/cli/modelzip";
    const fs::path log = scratch / "log.txt";
    {
      INFO("CLI: rm-tag as the next writer, on stderr");
      restore(dir, l);
      CHECK(run(cli + " rm-tag " + path.string() + " old3", log) == 0);
      const std::string out = testing::io_bytes(log);
      INFO(out);
      CHECK(out.find("m.zip: " + kNotice) != std::string::npos);
      CHECK(tags_of(path) == std::vector<std::string>(old_tags.begin(), old_tags.end() - 1));
      CHECK(!fs::exists(journal));
    }
    {
      INFO("CLI: import as the next writer, on stderr");
      restore(dir, l);
      write_npy(scratch / "y.npy");
      CHECK(run(cli + " import " + path.string() + " --tag next " + (scratch / "y.npy").string(),
                log) == 0);
      const std::string out = testing::io_bytes(log);
      INFO(out);
      CHECK(out.find("m.zip: " + kNotice) != std::string::npos);
      std::vector<std::string> expected = old_tags;
      expected.push_back("next");
      CHECK(tags_of(path) == expected);
    }
    // The Python the project tests with (Debian's, with numpy and pytest).
    const std::string python = fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
    if (std::system((python + " -c 'import numpy, pytest' 2>/dev/null").c_str()) != 0) {
      MESSAGE("Python not run: needs python3 with numpy and pytest");
      continue;
    }
    // Sanitizer builds leave the Python package out (Python cannot load it
    // under ASan); the normal build runs this part.
    if (!fs::exists(fs::path(build_dir) / "src" / "python" / "modelzip")) {
      MESSAGE("Python not run: this build has no Python package (sanitizer build)");
      continue;
    }
    {
      INFO("Python: a UserWarning (pytest.warns)");
      restore(dir, l);
      const fs::path script = scratch / "next_writer.py";
      testing::write_file(
          script,
          "import sys, numpy as np, pytest, modelzip\n"
          "with pytest.warns(UserWarning, match=r'm\\.zip: " +
              kNotice +
              "$') as caught:\n"
              "    modelzip.save(sys.argv[1], 'next', {'x': np.ones(3, np.float32)})\n"
              "assert len(caught) == 1, [str(w.message) for w in caught]\n"
              "# A writer that finds no journal says nothing.\n"
              "import warnings\n"
              "with warnings.catch_warnings():\n"
              "    warnings.simplefilter('error')\n"
              "    modelzip.save(sys.argv[1], 'after', {'x': np.ones(3, np.float32)})\n"
              "print('ok')\n");
      CHECK(run("PYTHONPATH=" + std::string(build_dir) + "/src/python " + python + " " +
                    script.string() + " " + path.string(),
                log) == 0);
      const std::string out = testing::io_bytes(log);
      INFO(out);
      CHECK(out.find("ok") != std::string::npos);
      std::vector<std::string> expected = old_tags;
      expected.push_back("next");
      expected.push_back("after");
      CHECK(tags_of(path) == expected);
    }
  }
}
