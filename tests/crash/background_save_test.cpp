// Background saves under faults and kills: a disk that fills up while the
// background thread writes surfaces as Error(io) from wait() with the old
// archive byte for byte; a process killed while its background save writes
// leaves the old archive (or the new one), which the next writer recovers.
#include <doctest/doctest.h>

#include "io/append_journal.hpp"
#include "io/syscalls.hpp"
#include "modelzip/background_save.hpp"
#include "scenarios.hpp"
#include "zip/append_session.hpp"

using namespace modelzip;
using namespace modelzip::crash;
using modelzip::testing::TempDir;
using Action = io::FaultInjector::Action;

namespace {

struct Base {
  Model old_model, new_model;
  std::string old_bytes;
  NewTag new_tag;
};

Base make_base(const fs::path& path) {
  Base b;
  b.old_model = write_base(path, 5);
  b.old_bytes = testing::io_bytes(path);
  TagSpec spec;
  b.new_tag = make_tag("new", 5, b.old_model, "old3", &spec);
  b.new_model = b.old_model;
  b.new_model.push_back(spec);
  return b;
}

}  // namespace

TEST_CASE("Background save: a full disk is thrown by wait(), the old archive stays") {
  TempDir dir;
  const fs::path path = dir / "m.zip";
  const Base base = make_base(path);
  for (bool append : {true, false}) {
    INFO("append " << append);
    reset_folder(dir.path(), path, base.old_bytes);
    BackgroundSaveOptions options;
    options.writer.append = append;
    io::FaultInjector injector({.action = Action::disk_full, .kind = io::SysOp::write, .nth = 3});
    injector.install();
    BackgroundSave save = BackgroundSave::start(path, "new", base.new_tag, options);
    std::optional<Error> error;
    try {
      save.wait();
    } catch (const Error& e) {
      error = e;
    }
    injector.uninstall();
    REQUIRE(error.has_value());
    INFO(error->what());
    CHECK(error->code() == ErrorCode::io);
    CHECK(std::string(error->what()).find("m.zip") != std::string::npos);
    CHECK(injector.fired());
    std::string why;
    if (io::read_append_journal(path).kind != io::JournalState::Kind::absent) {
      // The rollback could not write either (the disk is still full):
      // readers follow the journal to the old archive, and recovery
      // restores it byte for byte.
      CHECK(which_model(path, {&base.old_model}, &why) == 0);
      zip::recover_append(path, true);
    }
    CHECK(testing::io_bytes(path) == base.old_bytes);
    CHECK(files_in(dir.path()) == std::set<std::string>{"m.zip"});
    // wait() reported the error: the next save starts, and succeeds.
    BackgroundSave::start(path, "new", base.new_tag, options).wait();
    CHECK(which_model(path, {&base.new_model}, &why) == 0);
  }
}

TEST_CASE("Background save: kill -9 while the background thread writes") {
  TempDir dir;
  const fs::path path = dir / "m.zip";
  const Base base = make_base(path);
  // keep_last 3: the same commit also removes the two oldest tags.
  for (std::size_t keep_last : {0, 3}) {
    for (bool append : {true, false}) {
      for (std::uint64_t nth : {1, 4, 12}) {
        INFO("keep_last " << keep_last << ", append " << append << ", killed before write #"
                          << nth);
        reset_folder(dir.path(), path, base.old_bytes);
        const int status = run_child([&] {
          BackgroundSaveOptions options;
          options.writer.append = append;
          if (keep_last != 0) options.keep_last = keep_last;
          io::FaultInjector injector(
              {.action = Action::kill, .kind = io::SysOp::write, .nth = nth});
          injector.install();
          BackgroundSave::start(path, "new", base.new_tag, options).wait();
          return 20;  // not killed: the plan did not fire
        });
        REQUIRE(killed(status));
        std::string why;
        // Readers see the old archive; the next writer recovers it.
        CHECK(which_model(path, {&base.old_model}, &why) == 0);
        Writer::open(path).commit();
        CHECK(testing::io_bytes(path) == base.old_bytes);
        CHECK(files_in(dir.path()) == std::set<std::string>{"m.zip"});
        INFO(why);
      }
    }
  }
}
