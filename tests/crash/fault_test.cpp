// Fault injection: every file-changing system call of a commit fails in turn
// (EIO, ENOSPC, a short write, a disk that fills up mid-write), and a real
// disk-full through RLIMIT_FSIZE. A failed commit must throw Error(io) naming
// the archive, leave the old archive byte for byte (or, if it failed only
// after the new archive became visible, the complete new one), leave no
// temporary file, and leave the Writer usable: committing again succeeds.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>

#include <optional>

#include "io/append_journal.hpp"
#include "io/syscalls.hpp"
#include "scenarios.hpp"
#include "sweep.hpp"
#include "zip/append_session.hpp"

using namespace modelzip;
using namespace modelzip::crash;
using modelzip::testing::TempDir;
using Action = io::FaultInjector::Action;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Calls that may still fail after the new archive is visible (durability
// steps and cleanup), so a failure there may leave the new archive.
bool after_publication(io::SysOp op) {
  return op == io::SysOp::fsync_dir || op == io::SysOp::fsync_file || op == io::SysOp::close ||
         op == io::SysOp::unlink;
}

struct Outcome {
  std::optional<Error> error;
  bool old_intact = false;
  bool fired = false;
};

// One commit of `s` under `plan`; checks the invariants and that the same
// Writer then commits successfully.
Outcome fault_trial(const Scenario& s, const TempDir& dir, io::FaultInjector::Plan plan) {
  const fs::path path = dir / "m.zip";
  reset_folder(dir.path(), path, s.old_bytes);
  Outcome out;
  std::optional<Writer> w;
  {
    io::FaultInjector injector(plan);
    injector.install();
    try {
      w.emplace(Writer::open(path, s.options));
      s.stage(*w);
      w->commit();
    } catch (const Error& e) {
      out.error = e;
    } catch (const std::exception& e) {
      FAIL_CHECK("not a modelzip::Error: " << std::string(e.what()));
    }
    injector.uninstall();
    out.fired = injector.fired();
  }
  std::string why;
  std::string bytes = testing::io_bytes(path);
  if (io::read_append_journal(path).kind != io::JournalState::Kind::absent) {
    // The rollback of a failed append could not finish either (the
    // injected fault hit it too): readers use the journal, and recovery
    // restores the old archive byte for byte.
    CHECK(which_model(path, {&s.old_model}, &why) == 0);
    zip::recover_append(path, true);
    bytes = testing::io_bytes(path);
  }
  out.old_intact = bytes == s.old_bytes;
  for (const auto& name : files_in(dir.path())) {
    INFO("left: " << name);
    CHECK_FALSE(name.starts_with(".m.zip.mztmp-"));
  }
  if (out.error) {
    INFO(out.error->what());
    CHECK(out.error->code() == ErrorCode::io);
    CHECK(contains(out.error->what(), "m.zip"));
    if (out.old_intact) {
      CHECK(which_model(path, {&s.old_model}, &why) == 0);
    } else {
      // A failure after the commit point: a durability step, or marking the
      // freed bytes of an in-place removal (FORMAT.md section 8.5).
      CHECK((after_publication(plan.kind) || contains(out.error->what(), "is committed")));
      CHECK(which_model(path, {&s.new_model}, &why) == 0);
    }
  } else {
    CHECK(which_model(path, {&s.new_model}, &why) == 0);
  }
  INFO(why);
  // The Writer is still usable: committing again finishes the job (and
  // does not repeat changes that became visible).
  REQUIRE(w.has_value());
  try {
    w->commit();
  } catch (const std::exception& e) {
    FAIL_CHECK("commit after the failure: " << std::string(e.what()));
  }
  CHECK(which_model(path, {&s.new_model}, &why) == 0);
  CHECK(files_in(dir.path()) == std::set<std::string>{"m.zip"});
  return out;
}

// Up to `most` call numbers spread evenly over 1..count, first and last
// included.
std::vector<std::uint64_t> spread(std::uint64_t count, std::uint64_t most) {
  std::vector<std::uint64_t> out;
  if (count <= most) {
    for (std::uint64_t n = 1; n <= count; ++n) out.push_back(n);
  } else {
    for (std::uint64_t i = 0; i < most; ++i) out.push_back(1 + i * (count - 1) / (most - 1));
  }
  return out;
}

void sweep(ScenarioKind kind) {
  TempDir dir;
  const Scenario s = make_scenario(kind, dir.path());
  const fs::path path = dir / "m.zip";
  reset_folder(dir.path(), path, s.old_bytes);
  io::FaultInjector counter;
  counter.install();
  {
    Writer w = Writer::open(path, s.options);
    s.stage(w);
    w.commit();
    REQUIRE(w.last_stats().appended == s.appends);
  }
  counter.uninstall();

  int trials = 0, failed = 0;
  for (int k = 0; k < io::kSysOpCount; ++k) {
    const auto op = static_cast<io::SysOp>(k);
    std::vector<std::pair<Action, int>> faults = {{Action::fail, EIO}};
    if (op == io::SysOp::write)
      faults = {{Action::fail, EIO},
                {Action::fail, ENOSPC},
                {Action::disk_full, ENOSPC},
                {Action::short_write, 0}};
    for (const auto& fault : faults)
      for (std::uint64_t n : spread(counter.calls(op), testing::kUnderSanitizers ? 10 : 25)) {
        // Named copies: clang 14 cannot capture structured bindings in INFO.
        const Action action = fault.first;
        const int error = fault.second;
        INFO(s.name << ": " << std::string(io::sys_op_name(op)) << " call " << n << " of "
                    << counter.calls(op) << ", action " << static_cast<int>(action) << ", errno "
                    << error);
        Outcome o = fault_trial(s, dir, {.action = action, .kind = op, .nth = n, .error = error});
        CHECK(o.fired);
        // A short write is retried; every other fault of a write fails.
        if (op == io::SysOp::write) CHECK(o.error.has_value() == (action != Action::short_write));
        ++trials;
        failed += o.error.has_value();
      }
  }
  MESSAGE(s.name << ": " << trials << " fault trials (" << counter.total_calls()
                 << " calls in a clean commit), " << failed << " commits failed cleanly");
}

}  // namespace

TEST_CASE("Fault sweep: every call of a full rewrite fails in turn") {
  sweep(ScenarioKind::rewrite_add);
}

TEST_CASE("Fault sweep: every call of a remove-tag in place fails in turn") {
  sweep(ScenarioKind::remove_tag);
}

TEST_CASE("Fault sweep: every call of a replace + keep-last in place fails in turn") {
  sweep(ScenarioKind::replace_keep_last);
}

TEST_CASE("Fault sweep: every call of an append fails in turn") {
  sweep(ScenarioKind::append_add);
}

TEST_CASE("Faults: each kind gives a clear error and keeps the old archive") {
  TempDir dir;
  const Scenario rewrite = make_scenario(ScenarioKind::rewrite_add, dir.path());
  const Scenario append = make_scenario(ScenarioKind::append_add, dir.path());
  struct Case {
    const Scenario* s;
    io::FaultInjector::Plan plan;
    const char* message;
    bool old_intact;
  };
  const Case cases[] = {
      {&rewrite,
       {.action = Action::fail, .kind = io::SysOp::write, .nth = 3, .error = EIO},
       "cannot write: Input/output error",
       true},
      {&rewrite,
       {.action = Action::fail, .kind = io::SysOp::write, .nth = 40, .error = ENOSPC},
       "cannot write: No space left on device",
       true},
      {&rewrite,
       {.action = Action::disk_full, .kind = io::SysOp::write, .nth = 20},
       "No space left on device",
       true},
      {&rewrite,
       {.action = Action::fail, .kind = io::SysOp::open, .nth = 2, .error = EACCES},
       // Names the archive and its folder, not the temporary file.
       ": permission denied",
       true},
      {&rewrite,
       {.action = Action::fail, .kind = io::SysOp::fsync_file, .nth = 1},
       "cannot fsync the new version",
       true},
      {&rewrite,
       {.action = Action::fail, .kind = io::SysOp::rename, .nth = 1},
       "cannot replace the archive (rename failed",
       true},
      {&rewrite,
       {.action = Action::fail, .kind = io::SysOp::close, .nth = 1, .error = EIO},
       "cannot write file",
       true},
      {&rewrite,
       {.action = Action::fail, .kind = io::SysOp::fsync_dir, .nth = 1},
       "replaced the old one, but fsync of its folder failed",
       false},
      {&append,
       {.action = Action::fail, .kind = io::SysOp::write, .nth = 1, .error = ENOSPC},
       "cannot write the append journal",
       true},
      {&append,
       {.action = Action::fail, .kind = io::SysOp::fsync_dir, .nth = 1},
       "cannot fsync the folder after writing the append journal",
       true},
      {&append,
       {.action = Action::fail, .kind = io::SysOp::write, .nth = 30, .error = EIO},
       "cannot write: Input/output error",
       true},
      {&append,
       {.action = Action::fail, .kind = io::SysOp::fsync_file, .nth = 2},
       "fsync failed",
       true},
  };
  for (const Case& c : cases) {
    INFO(c.s->name << ": " << std::string(io::sys_op_name(c.plan.kind)) << " #" << c.plan.nth);
    Outcome o = fault_trial(*c.s, dir, c.plan);
    REQUIRE(o.error.has_value());
    INFO(o.error->what());
    CHECK(contains(o.error->what(), c.message));
    CHECK(!contains(o.error->what(), ".mztmp"));
    CHECK(o.old_intact == c.old_intact);
  }
}

// A real full disk: the file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) of
// a child process stops the commit halfway through its writes.
TEST_CASE("Faults: disk full through RLIMIT_FSIZE") {
  TempDir dir;
  for (ScenarioKind kind : {ScenarioKind::rewrite_add, ScenarioKind::append_add}) {
    const Scenario s = make_scenario(kind, dir.path());
    const fs::path path = dir / "m.zip";
    // The new data is about 50 KB; the limit lets a part of it through.
    const std::uint64_t base = kind == ScenarioKind::append_add ? s.old_bytes.size() : 0;
    for (std::uint64_t cut : {base + 100, base + 5000, base + 20000}) {
      INFO(s.name << ": file size limit " << cut);
      reset_folder(dir.path(), path, s.old_bytes);
      int status = run_child([&] {
        ::signal(SIGXFSZ, SIG_IGN);
        rlimit rl{static_cast<rlim_t>(cut), RLIM_INFINITY};
        if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) return 10;
        Writer w = Writer::open(path, s.options);
        s.stage(w);
        try {
          w.commit();
        } catch (const Error& e) {
          if (e.code() != ErrorCode::io) return 11;
          if (!contains(e.what(), "m.zip") || !contains(e.what(), "File too large")) return 12;
          // The same Writer succeeds once the disk has room again.
          rl.rlim_cur = RLIM_INFINITY;
          if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) return 13;
          if (testing::io_bytes(path) != s.old_bytes) return 14;
          for (const auto& name : files_in(dir.path()))
            if (name != "m.zip") return 15;
          w.commit();
          return 0;
        }
        return 16;  // the limit did not stop the commit
      });
      CHECK(WIFEXITED(status));
      CHECK(WEXITSTATUS(status) == 0);
      std::string why;
      CHECK(which_model(path, {&s.new_model}, &why) == 0);
      CHECK(files_in(dir.path()) == std::set<std::string>{"m.zip"});
    }
  }
}

// Recovery of an interrupted append must not drop the journal unless the
// old tail really was written back: otherwise the previous archive is lost
// behind bytes that do not parse.
TEST_CASE("Faults: a failing restore during recovery keeps the journal") {
  TempDir dir;
  const Scenario s = make_scenario(ScenarioKind::append_add, dir.path());
  const fs::path path = dir / "m.zip";
  // The base archive's tail: tags.txt (the last entry) onwards.
  const std::string tags_header = std::string("PK\x03\x04", 4);
  std::size_t tail_start = s.old_bytes.rfind("tags.txt");
  REQUIRE(tail_start != std::string::npos);
  tail_start = s.old_bytes.rfind(tags_header, tail_start);
  const std::string old_tail = s.old_bytes.substr(tail_start);
  for (io::SysOp op : {io::SysOp::write, io::SysOp::truncate, io::SysOp::fsync_file}) {
    INFO(std::string(io::sys_op_name(op)));
    // An interrupted append: the tail overwritten by part of new entries.
    reset_folder(dir.path(), path, s.old_bytes);
    testing::write_file(path, s.old_bytes.substr(0, tail_start) + std::string(5000, 'x'));
    io::write_append_journal(path, {7, tail_start, s.old_bytes.size(), Bytes::copy_of(old_tail)},
                             true);
    std::string why;
    REQUIRE(which_model(path, {&s.old_model}, &why) == 0);  // readers use the journal
    {
      io::FaultInjector injector({.action = Action::fail, .kind = op, .nth = 1});
      injector.install();
      Writer w = Writer::open(path, s.options);
      s.stage(w);
      try {
        w.commit();
        FAIL_CHECK("the commit succeeded");
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::io);
        CHECK(contains(e.what(), "cannot restore the archive from an interrupted append"));
        CHECK(contains(e.what(), "m.zip"));
      }
    }
    CHECK(io::read_append_journal(path).kind == io::JournalState::Kind::valid);
    CHECK(which_model(path, {&s.old_model}, &why) == 0);
    // The next writer recovers and commits.
    Writer w = Writer::open(path, s.options);
    s.stage(w);
    w.commit();
    CHECK(which_model(path, {&s.new_model}, &why) == 0);
    CHECK(files_in(dir.path()) == std::set<std::string>{"m.zip"});
  }
}
