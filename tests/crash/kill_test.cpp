// Kill trials: a commit runs in a forked child that is killed (SIGKILL) right
// before its n-th file-changing system call, for every n of a clean run, and
// at random moments by the parent. After each kill the archive must open,
// verify, and hold exactly the old or exactly the new tags with their bytes;
// the next writer must recover and commit, leaving no stray files.
//
// A SIGKILL loses no written data (the page cache survives the process), so
// these trials show the order of operations is safe; they cannot show that
// the fsyncs are in the right places against power loss.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "io/append_journal.hpp"
#include "io/syscalls.hpp"
#include "scenarios.hpp"
#include "sweep.hpp"
#include "zip/append_session.hpp"

using namespace modelzip;
using namespace modelzip::crash;
using modelzip::testing::TempDir;

namespace {

using Clock = std::chrono::steady_clock;

// Files a kill may leave beside the archive, all removed by the next writer:
// its temporary file (rewrite) or the append journal. Writers lock the
// archive itself: no lock file.
bool allowed_leftover(const std::string& name) {
  return name == "m.zip" || name == ".m.zip.modelzip-append" || name.starts_with(".m.zip.mztmp-");
}

// A writer (`who`, for the failure) commits `tag` to the archive in `dir`
// unhindered: the archive then holds `expected`, and nothing is left beside it.
void commit_unhindered(const TempDir& dir, const std::string& tag, NewTag nt, const Model& expected,
                       const std::string& who) {
  const fs::path path = dir / "m.zip";
  try {
    Writer w = Writer::open(path, WriterOptions{.durable = false});
    w.add_tag(tag, std::move(nt));
    w.commit();
  } catch (const std::exception& e) {
    FAIL_CHECK(who << ": " << std::string(e.what()));
  }
  std::string why;
  INFO(why);  // what which_model found wrong
  CHECK(which_model(path, {&expected}, &why) == 0);
  CHECK(files_in(dir.path()) == std::set<std::string>{"m.zip"});
}

// Checks the folder after an interrupted commit, then lets the next writer
// recover and commit. Returns which model the archive held.
int check_after_kill(const Scenario& s, const TempDir& dir, const std::string& label) {
  INFO(s.name << " " << label);
  const fs::path path = dir / "m.zip";
  for (const auto& name : files_in(dir.path())) {
    INFO("left: " << name);
    CHECK(allowed_leftover(name));
  }
  std::string why;
  int state = which_model(path, {&s.old_model, &s.new_model}, &why);
  INFO(why);
  CHECK(state >= 0);
  if (state < 0) return state;
  // The next writer recovers (journal, temporary files) and commits.
  NewTag next;
  Model expected = with_next(state == 0 ? s.old_model : s.new_model, &next);
  commit_unhindered(dir, "next", std::move(next), expected, "next writer");
  // The next writer also marks freed ranges a kill left unmarked: streaming
  // readers read through again.
  CHECK(streaming_problem(path) == "");
  return state;
}

void run_kill_trials(ScenarioKind kind) {
  TempDir dir;
  const Scenario s = make_scenario(kind, dir.path());
  const fs::path path = dir / "m.zip";

  // A clean run: how many calls, and how long it takes.
  reset_folder(dir.path(), path, s.old_bytes);
  std::uint64_t total = 0;
  const auto start = Clock::now();
  REQUIRE(exited_ok(commit_in_child(s, path, {}, &total)));
  const auto clean_time = Clock::now() - start;
  std::string why;
  REQUIRE(which_model(path, {&s.new_model}, &why) == 0);
  // Every scenario writes entries, one or more calls each: far fewer calls
  // would mean the injector does not see the writer's calls.
  REQUIRE(total >= s.min_calls);

  // A kill before every call, and one run that passes them all (under the
  // sanitizers a sample of the calls: tests/support/sweep.hpp).
  int first_new = -1, trials = 0;
  for (std::uint64_t n : testing::sweep_points(1, total + 1, 16, 5)) {
    reset_folder(dir.path(), path, s.old_bytes);
    io::FaultInjector::Plan plan{
        .action = io::FaultInjector::Action::kill, .any_kind = true, .nth = n};
    int status = commit_in_child(s, path, plan);
    INFO(s.name << ": kill before call " << n << " of " << total);
    if (n <= total)
      CHECK(killed(status));
    else
      CHECK(exited_ok(status));
    int state = check_after_kill(s, dir, "kill before call " + std::to_string(n));
    // Once the new archive is visible, it stays so at every later point.
    if (state == 1 && first_new < 0) first_new = static_cast<int>(n);
    if (first_new >= 0) CHECK(state == 1);
    ++trials;
  }
  CHECK(first_new > 1);  // the first calls cannot have published anything

  // Real kills at random moments, independent of the injection seam: delays
  // drawn from [0, span), where span starts at 1.5 times the clean run and
  // shrinks whenever the commit finished before the kill.
  std::mt19937_64 rng(static_cast<std::uint64_t>(kind) + 17);
  auto span_us =
      std::chrono::duration_cast<std::chrono::microseconds>(clean_time).count() * 3 / 2 + 1;
  int interrupted = 0;
  const int random_trials = 25;
  for (int t = 0; t < random_trials; ++t) {
    reset_folder(dir.path(), path, s.old_bytes);
    const auto delay = std::chrono::microseconds(static_cast<long>(rng() % span_us));
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      try {
        Writer w = Writer::open(path, s.options);
        s.stage(w);
        w.commit();
      } catch (...) {
        ::_exit(99);
      }
      ::_exit(0);
    }
    std::this_thread::sleep_for(delay);
    ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
    }
    CHECK((killed(status) || exited_ok(status)));
    if (killed(status))
      ++interrupted;
    else
      span_us = span_us * 3 / 4 + 1;
    check_after_kill(s, dir, "random kill after " + std::to_string(delay.count()) + " us");
    ++trials;
  }
  MESSAGE(s.name << ": " << total << " calls in a clean run ("
                 << std::chrono::duration_cast<std::chrono::milliseconds>(clean_time).count()
                 << " ms); new archive visible from call " << first_new << "; " << trials
                 << " trials, " << interrupted << " of " << random_trials
                 << " random kills landed before the commit ended");
}

}  // namespace

TEST_CASE("Kill trials: full rewrite adding a tag") {
  run_kill_trials(ScenarioKind::rewrite_add);
}

TEST_CASE("Kill trials: remove-tag in place") {
  run_kill_trials(ScenarioKind::remove_tag);
}

TEST_CASE("Kill trials: remove-tag by a rewrite") {
  run_kill_trials(ScenarioKind::remove_tag_rewrite);
}

TEST_CASE("Kill trials: replace a tag and keep the last 3, in place") {
  run_kill_trials(ScenarioKind::replace_keep_last);
}

TEST_CASE("Kill trials: append path adding a tag in place") {
  run_kill_trials(ScenarioKind::append_add);
}

// A crash of the writer that recovers an interrupted append: kill it before
// each of its calls; the old archive must survive every combination.
TEST_CASE("Kill trials: recovery of an interrupted append") {
  TempDir dir;
  const Scenario s = make_scenario(ScenarioKind::append_add, dir.path());
  const fs::path path = dir / "m.zip";
  // The interrupted append: killed halfway through its calls.
  reset_folder(dir.path(), path, s.old_bytes);
  std::uint64_t total = 0;
  REQUIRE(exited_ok(commit_in_child(s, path, {}, &total)));
  reset_folder(dir.path(), path, s.old_bytes);
  REQUIRE(killed(commit_in_child(
      s, path, {.action = io::FaultInjector::Action::kill, .any_kind = true, .nth = total / 2})));
  REQUIRE(io::read_append_journal(path).kind == io::JournalState::Kind::valid);
  const std::string crashed = testing::io_bytes(path);
  const std::string journal = testing::io_bytes(io::append_journal_path(path));
  REQUIRE(crashed != s.old_bytes);  // the tail was overwritten in part

  auto restore = [&] {
    reset_folder(dir.path(), path, crashed);
    testing::write_file(io::append_journal_path(path), journal);
  };
  auto recover = [&](io::FaultInjector::Plan plan, std::uint64_t* calls) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    int status = run_child([&] {
      io::FaultInjector injector(plan);
      injector.install();
      NewTag next;
      with_next(s.old_model, &next);
      Writer w = Writer::open(path, WriterOptions{.durable = true});
      w.add_tag("next", std::move(next));
      w.commit();
      injector.uninstall();
      std::uint64_t n = injector.total_calls();
      return ::write(fds[1], &n, sizeof n) == sizeof n ? 0 : 2;
    });
    ::close(fds[1]);
    if (calls) REQUIRE(::read(fds[0], calls, sizeof *calls) == sizeof *calls);
    ::close(fds[0]);
    return status;
  };
  restore();
  std::uint64_t recover_calls = 0;
  REQUIRE(exited_ok(recover({}, &recover_calls)));
  NewTag unused;
  const Model with_next_tag = with_next(s.old_model, &unused);
  std::string why;
  REQUIRE(which_model(path, {&with_next_tag}, &why) == 0);
  for (std::uint64_t n = 1; n <= recover_calls; ++n) {
    restore();
    INFO("recovery killed before call " << n << " of " << recover_calls);
    CHECK(killed(
        recover({.action = io::FaultInjector::Action::kill, .any_kind = true, .nth = n}, nullptr)));
    // Either the old archive (recovered or still behind its journal) or
    // the old archive plus "next".
    int state = which_model(path, {&s.old_model, &with_next_tag}, &why);
    INFO(why);
    CHECK(state >= 0);
    if (state < 0) continue;
    // Then a clean writer finishes the job.
    TagSpec after_spec;
    Model after = state == 0 ? s.old_model : with_next_tag;
    NewTag after_tag = make_tag("after", 1, after, "", &after_spec);
    after.push_back(after_spec);
    commit_unhindered(dir, "after", std::move(after_tag), after, "writer after the recovery");
  }
  MESSAGE("recovery: " << recover_calls << " calls, each one interrupted");
}

// Journals that fail their checks (cut short, or a saved tail byte changed so
// that the CRC no longer matches) are never applied: readers use the
// archive file as it is, and recovery removes the journal and leaves the
// file byte for byte. Built from the real journals of appends killed at
// every call that leaves one.
TEST_CASE("Kill trials: a torn journal or one whose CRC fails is never applied") {
  TempDir dir;
  const Scenario s = make_scenario(ScenarioKind::append_add, dir.path());
  const fs::path path = dir / "m.zip";
  reset_folder(dir.path(), path, s.old_bytes);
  std::uint64_t total = 0;
  REQUIRE(exited_ok(commit_in_child(s, path, {}, &total)));
  int checked = 0;
  for (std::uint64_t n = 1; n <= total; ++n) {
    reset_folder(dir.path(), path, s.old_bytes);
    REQUIRE(killed(commit_in_child(
        s, path, {.action = io::FaultInjector::Action::kill, .any_kind = true, .nth = n})));
    if (io::read_append_journal(path).kind != io::JournalState::Kind::valid) continue;
    const std::string archive = testing::io_bytes(path);
    const std::string journal = testing::io_bytes(io::append_journal_path(path));
    std::string flipped = journal;
    flipped[43] = static_cast<char>(flipped[43] ^ 0x01);  // first byte of the saved tail
    for (const std::string& bad : {journal.substr(0, journal.size() / 2), flipped}) {
      INFO("kill before call " << n << ", journal of " << bad.size() << " bytes");
      reset_folder(dir.path(), path, archive);
      testing::write_file(io::append_journal_path(path), bad);
      REQUIRE(io::read_append_journal(path).kind == io::JournalState::Kind::torn);
      // Readers: the file as it is (the old archive if the kill came
      // before the first tail write, a finished new one, or a tail torn by
      // the kill, which is refused) -- never the corrupted journal.
      try {
        Archive a = Archive::open(path);
        std::string why;
        CHECK(which_model(path, {&s.old_model, &s.new_model}, &why) >= 0);
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::corrupt);
      }
      zip::recover_append(path, true);
      CHECK(testing::io_bytes(path) == archive);
      CHECK_FALSE(fs::exists(io::append_journal_path(path)));
      ++checked;
    }
  }
  CHECK(checked > 20);
  MESSAGE("torn and bad-CRC journals: " << checked << " states checked");
}
