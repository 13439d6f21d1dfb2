// CollectiveOptions::rank_lock_timeout and MODELZIP_RANK_LOCK_TIMEOUT: when
// a collective commit of an existing archive fails while some rank still
// holds its writing lock (FORMAT.md §8.4), the root waits that long for it,
// then leaves the append journal to the next writer; the next writer rolls
// the commit back and says so.
//
// The commit runs in a forked child over a one-rank communicator whose
// engine "fails" at its first operation after the journal exists; a second
// child (a straggler "rank 1") holds a writing lock on the archive from just
// before that failure until the test ends. With a short timeout the commit
// must give up well within the test's bound (the default 60 s would not);
// the bound only stops the test from hanging: nothing is timed.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "crash_support.hpp"
#include "dist/rank_locks.hpp"
#include "io/append_journal.hpp"
#include "modelzip/dist/distributed.hpp"

using namespace modelzip;
using namespace modelzip::crash;
using modelzip::testing::TempDir;

namespace {

// A group of one rank; before each operation it runs `before` (which may
// throw, as a failing engine would).
class OneRank final : public Communicator {
 public:
  std::function<void()> before;
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::vector<std::string> gather(std::string_view bytes, int) override {
    before();
    return {std::string(bytes)};
  }
  std::string broadcast(std::string_view bytes, int) override {
    before();
    return std::string(bytes);
  }
  std::optional<Failure> agree(std::string_view error) override {
    before();
    if (error.empty()) return std::nullopt;
    return Failure{0, std::string(error)};
  }
};

// Child: waits for a byte on `go`, takes rank 1's alive and writing locks on
// `path`, answers on `done`, then holds them until killed (at most 300 s).
pid_t start_straggler(const fs::path& path, int go, int done) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    char c = 0;
    if (::read(go, &c, 1) != 1) ::_exit(2);
    try {
      dist::RankLocks locks(path, 1);
      locks.begin_writes();
      if (::write(done, &c, 1) != 1) ::_exit(3);
      for (int i = 0; i < 3000; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } catch (...) {
      ::_exit(4);
    }
    ::_exit(0);
  }
  return pid;
}

// Forks the collective commit of tag "b"; exit status 0 when it failed with
// a modelzip::Error and left the journal, 5 when it succeeded, 6 when the
// journal is gone (the root rolled back: it did not wait for the straggler).
pid_t start_commit(const fs::path& path, std::optional<std::chrono::milliseconds> option,
                   const char* env, int go, int done) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 99;
    try {
      if (env) ::setenv("MODELZIP_RANK_LOCK_TIMEOUT", env, 1);
      OneRank comm;
      bool failed = false;
      comm.before = [&] {
        if (failed || !fs::exists(io::append_journal_path(path))) return;
        failed = true;
        char c = 1;
        if (::write(go, &c, 1) != 1 || ::read(done, &c, 1) != 1) ::_exit(7);
        throw Error(ErrorCode::io, "test: the engine failed");
      };
      CollectiveWriter w(path, comm,
                         CollectiveOptions{.durable = false, .rank_lock_timeout = option});
      w.add("x", bytes_tensor(std::string(100000, 'x')));
      try {
        w.commit("b");
        code = 5;
      } catch (const Error&) {
        code = fs::exists(io::append_journal_path(path)) ? 0 : 6;
      }
    } catch (...) {
    }
    ::_exit(code);
  }
  return pid;
}

// Waits up to `bound` for `pid`; kills it past that. Its wait status, or -1
// when it had to be killed.
int wait_bounded(pid_t pid, std::chrono::seconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status;
}

void run_case(std::optional<std::chrono::milliseconds> option, const char* env) {
  TempDir dir;
  const fs::path path = dir / "m.zip";
  {
    Writer w = Writer::open(path, WriterOptions{.durable = false});
    NewTag a;
    a.add("x", bytes_tensor(std::string(1000, 'a')));
    w.add_tag("a", std::move(a));
    w.commit();
  }
  int go[2], done[2];
  REQUIRE(::pipe(go) == 0);
  REQUIRE(::pipe(done) == 0);
  const pid_t straggler = start_straggler(path, go[0], done[1]);
  const pid_t committer = start_commit(path, option, env, go[1], done[0]);
  // 60 s (the default) would exceed this bound; the short timeouts are far
  // below it.
  const int status = wait_bounded(committer, std::chrono::seconds(40));
  CHECK_MESSAGE(status != -1, "the commit still waited for the straggler after 40 s");
  if (status != -1) {
    INFO("exit status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1));
    CHECK(exited_ok(status));
  }
  ::kill(straggler, SIGKILL);
  ::waitpid(straggler, nullptr, 0);
  for (int fd : {go[0], go[1], done[0], done[1]}) ::close(fd);

  // The next writer rolls the abandoned commit back and says so.
  std::vector<std::string> notices;
  Writer w = Writer::open(
      path, WriterOptions{.durable = false,
                          .on_notice = [&](const std::string& n) { notices.push_back(n); }});
  NewTag next;
  next.add("y", bytes_tensor("y"));
  w.add_tag("next", std::move(next));
  w.commit();
  CHECK(notices == std::vector<std::string>{"rolled back an interrupted save of tag b"});
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"a", "next"});
  CHECK(files_in(dir.path()) == std::set<std::string>{"m.zip"});
}

}  // namespace

TEST_CASE("rank_lock_timeout: a short wait for a straggling rank takes effect") {
  SUBCASE("CollectiveOptions::rank_lock_timeout") {
    run_case(std::chrono::milliseconds(200), nullptr);
  }
  SUBCASE("MODELZIP_RANK_LOCK_TIMEOUT") {
    run_case(std::nullopt, "0.2");
  }
}

TEST_CASE("rank_lock_timeout: invalid values are refused") {
  CHECK(dist::writers_timeout(std::chrono::milliseconds(1500)) == std::chrono::milliseconds(1500));
  CHECK_THROWS_AS(dist::writers_timeout(std::chrono::milliseconds(-1)), Error);
  const char* saved = std::getenv("MODELZIP_RANK_LOCK_TIMEOUT");
  const std::string before = saved ? saved : "";
  ::unsetenv("MODELZIP_RANK_LOCK_TIMEOUT");
  CHECK(dist::writers_timeout(std::nullopt) == dist::kWritersTimeout);
  ::setenv("MODELZIP_RANK_LOCK_TIMEOUT", "2.5", 1);
  CHECK(dist::writers_timeout(std::nullopt) == std::chrono::milliseconds(2500));
  for (const char* bad : {"-1", "abc", "1s", "nan"}) {
    ::setenv("MODELZIP_RANK_LOCK_TIMEOUT", bad, 1);
    CHECK_THROWS_AS(dist::writers_timeout(std::nullopt), Error);
  }
  if (saved)
    ::setenv("MODELZIP_RANK_LOCK_TIMEOUT", before.c_str(), 1);
  else
    ::unsetenv("MODELZIP_RANK_LOCK_TIMEOUT");
}
