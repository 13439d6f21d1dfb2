// io/durable_file: TempFile commit and cleanup, OutputFile / AppendFile,
// remove_stale_temp_files (only dead writers' files), FileLock (excludes a
// second process).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "../zip/expect_error.hpp"
#include "io/durable_file.hpp"
#include "modelzip/error.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;
namespace fs = std::filesystem;

namespace {

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

// The pid of a process that existed and has exited (and been reaped).
pid_t dead_pid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

// A child that sleeps until killed; kill_child() ends and reaps it.
pid_t sleeping_child() {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  return pid;
}
void kill_child(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

}  // namespace

TEST_CASE("TempFile: a unique path beside the target, named after the writer's pid") {
  TempDir dir;
  auto target = dir / "model.zip";
  io::TempFile a = io::TempFile::beside(target);
  io::TempFile b = io::TempFile::beside(target);
  CHECK(a.path() != b.path());
  CHECK(a.path().parent_path() == dir.path());
  CHECK(a.target() == target);
  const std::string prefix = ".model.zip.mztmp-" + std::to_string(::getpid()) + "-";
  CHECK(a.path().filename().string().rfind(prefix, 0) == 0);
  CHECK(a.path().filename().string().size() == prefix.size() + 16);  // 64 random bits in hex
  CHECK_FALSE(fs::exists(a.path()));                                 // reserved, not created
}

TEST_CASE("TempFile: commit replaces the target; without commit the file is removed") {
  TempDir dir;
  auto target = dir / "m.zip";
  write_file(target, "old");
  for (bool durable : {true, false}) {
    INFO("durable " << durable);
    {
      io::TempFile t = io::TempFile::beside(target);
      write_file(t.path(), durable ? "new durable" : "new");
      t.commit(durable);
      CHECK_FALSE(fs::exists(t.path()));
    }
    CHECK(io_bytes(target) == (durable ? "new durable" : "new"));
  }
  {
    io::TempFile t = io::TempFile::beside(target);
    write_file(t.path(), "abandoned");
    CHECK(fs::exists(t.path()));
  }  // destroyed without commit
  CHECK(io_bytes(target) == "new");
  CHECK(files_in(dir.path()) == std::set<std::string>{"m.zip"});
  // A moved-from TempFile does not remove the file; the new owner does.
  fs::path p;
  {
    io::TempFile t = io::TempFile::beside(target);
    p = t.path();
    write_file(p, "moved");
    io::TempFile moved(std::move(t));
    CHECK(fs::exists(p));
  }
  CHECK_FALSE(fs::exists(p));
}

TEST_CASE("TempFile: a failing commit throws Error(io) and leaves the target alone") {
  TempDir dir;
  auto target = dir / "m.zip";
  write_file(target, "old");
  {
    io::TempFile t = io::TempFile::beside(target);  // never written: rename fails
    REQUIRE_ERROR_AS(err, t.commit(false), ErrorCode::io, "cannot replace the archive");
    CHECK(err.context().archive == target.string());
  }
  {
    io::TempFile t = io::TempFile::beside(target);
    CHECK_ERROR(t.commit(true), ErrorCode::io, "cannot open for fsync");
  }
  {
    // The target is a non-empty folder: rename refuses.
    auto folder_target = dir / "folder.zip";
    fs::create_directory(folder_target);
    write_file(folder_target / "inside", "x");
    io::TempFile t = io::TempFile::beside(folder_target);
    write_file(t.path(), "new");
    CHECK_ERROR(t.commit(true), ErrorCode::io, "cannot replace the archive");
    CHECK(io_bytes(folder_target / "inside") == "x");
  }
  CHECK(io_bytes(target) == "old");
  CHECK(files_in(dir.path()) == std::set<std::string>{"m.zip", "folder.zip"});
}

TEST_CASE("TempFile: a target without a folder part lives in the current folder") {
  TempDir dir;
  pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 1;
    try {
      if (::chdir(dir.path().c_str()) == 0) {
        io::TempFile t = io::TempFile::beside("plain.zip");
        write_file(t.path(), "data");
        t.commit(true);
        rc = t.path().parent_path() == "." && io_bytes("plain.zip") == "data" ? 0 : 2;
      }
    } catch (...) {
      rc = 3;
    }
    ::_exit(rc);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(io_bytes(dir / "plain.zip") == "data");
}

TEST_CASE("sync_path: files and folders; a missing path is an Error(io)") {
  TempDir dir;
  write_file(dir / "f", "x");
  io::sync_path(dir / "f", false);
  io::sync_path(dir.path(), true);
  CHECK_ERROR(io::sync_path(dir / "missing", false), ErrorCode::io, "cannot open for fsync");
  CHECK_ERROR(io::sync_path(dir / "f", true), ErrorCode::io, "cannot open for fsync");
}

TEST_CASE("OutputFile creates exclusively; AppendFile writes in place and truncates") {
  TempDir dir;
  {
    io::OutputFile out(dir / "new");
    REQUIRE(::write(out.fd(), "hello", 5) == 5);
    out.close();
  }
  CHECK(io_bytes(dir / "new") == "hello");
  CHECK_ERROR(io::OutputFile(dir / "new"), ErrorCode::io, "");
  CHECK(io_bytes(dir / "new") == "hello");
  CHECK_ERROR(io::OutputFile(dir / "no-folder" / "x"), ErrorCode::io, "");
  {
    io::AppendFile a(dir / "new");
    REQUIRE(::pwrite(a.fd(), " world", 6, 5) == 6);
    a.sync();
    a.truncate(8);
    a.close();
  }
  CHECK(io_bytes(dir / "new") == "hello wo");
  CHECK_ERROR(io::AppendFile(dir / "missing"), ErrorCode::io, "");
}

TEST_CASE("remove_stale_temp_files removes only dead writers' temporary files") {
  TempDir dir;
  auto target = dir / "a.zip";
  const pid_t dead = dead_pid();
  const pid_t alive = sleeping_child();
  const std::string d = std::to_string(dead), l = std::to_string(alive),
                    me = std::to_string(::getpid());
  const std::vector<std::string> removed = {
      ".a.zip.mztmp-" + d + "-0123456789abcdef",
      ".a.zip.mztmp-" + d + "-0123456789abcdef.Xy12Ab",  // libzip-style suffix
      ".a.zip.mztmp-99999999-00",                        // beyond any pid: no such process
  };
  const std::vector<std::string> kept = {
      "a.zip",
      ".a.zip.modelzip-lock",
      ".a.zip.mztmp-" + l + "-0123",   // a live writer (another process)
      ".a.zip.mztmp-" + me + "-0123",  // this process
      ".a.zip.mztmp-1-0123",           // init is alive
      ".b.zip.mztmp-" + d + "-0123",   // another archive's file
      "a.zip.mztmp-" + d + "-0123",    // not our naming (no leading dot)
      ".a.zip.mztmp-abc-0123",         // no pid
      ".a.zip.mztmp-0-0123",           // pid 0 is never a writer
      ".a.zip.mztmp--5-0123",          // negative
      ".a.zip.mztmp-" + d,             // no '-' after the pid
      ".a.zip.mztmp-" + d + "x-0",     // junk after the pid
  };
  for (const auto& n : removed) write_file(dir / n, "x");
  for (const auto& n : kept) write_file(dir / n, "x");
  fs::create_directory(dir / "sub");
  write_file(dir / "sub" / (".a.zip.mztmp-" + d + "-1"), "x");  // other folders are not searched

  io::remove_stale_temp_files(target);
  auto left = files_in(dir.path());
  for (const auto& n : removed) CHECK_MESSAGE(left.count(n) == 0, n);
  for (const auto& n : kept) CHECK_MESSAGE(left.count(n) == 1, n);
  CHECK(fs::exists(dir / "sub" / (".a.zip.mztmp-" + d + "-1")));
  kill_child(alive);

  // A missing folder is not an error (never throws).
  io::remove_stale_temp_files(dir / "missing" / "a.zip");
}

TEST_CASE("FileLock: creates the lock file and excludes a second process until released") {
  TempDir dir;
  auto target = dir / "m.zip";
  int go[2], ready[2], acquired[2];
  REQUIRE(::pipe(go) == 0);
  REQUIRE(::pipe(ready) == 0);
  REQUIRE(::pipe(acquired) == 0);
  // The child is forked before the parent locks: a flock lock belongs to the
  // open file description, which a child forked later would share (and keep
  // locked after the parent closes its descriptor).
  pid_t child = ::fork();
  if (child == 0) {
    ::close(go[1]);
    ::close(ready[0]);
    ::close(acquired[0]);
    char c = 0;
    if (::read(go[0], &c, 1) != 1) ::_exit(3);
    c = 'r';
    (void)!::write(ready[1], &c, 1);
    try {
      io::FileLock second(target);  // blocks while the parent holds the lock
      c = 'a';
      (void)!::write(acquired[1], &c, 1);
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(0);
  }
  // Ends the child if a REQUIRE below fails (it would otherwise block forever).
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      if (pid > 0) kill_child(pid);
    }
  } reaper{child};
  ::close(go[0]);
  ::close(ready[1]);
  ::close(acquired[1]);
  auto lock = std::make_unique<io::FileLock>(target);
  CHECK(fs::exists(dir / ".m.zip.modelzip-lock"));
  char c = 'g';
  REQUIRE(::write(go[1], &c, 1) == 1);
  REQUIRE(::read(ready[0], &c, 1) == 1);
  // The child is running and trying to lock: it must not get the lock.
  pollfd p{acquired[0], POLLIN, 0};
  CHECK(::poll(&p, 1, 500) == 0);
  lock.reset();  // release
  p.revents = 0;
  REQUIRE(::poll(&p, 1, 10000) == 1);
  CHECK(::read(acquired[0], &c, 1) == 1);
  CHECK(c == 'a');
  int status = 0;
  ::waitpid(child, &status, 0);
  reaper.pid = 0;
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  ::close(go[1]);
  ::close(ready[0]);
  ::close(acquired[0]);

  // A lock dies with its process: a killed holder does not block others.
  int held[2];
  REQUIRE(::pipe(held) == 0);
  pid_t holder = ::fork();
  if (holder == 0) {
    io::FileLock l(target);
    char h = 'h';
    (void)!::write(held[1], &h, 1);
    ::pause();
    ::_exit(0);
  }
  ::close(held[1]);
  REQUIRE(::read(held[0], &c, 1) == 1);  // the child holds the lock now
  ::close(held[0]);
  kill_child(holder);
  io::FileLock after(target);  // would block forever if the lock survived
  io::FileLock moved(std::move(after));
}

TEST_CASE("FileLock: a folder that does not exist is an Error(io)") {
  TempDir dir;
  REQUIRE_ERROR_AS(err, io::FileLock(dir / "missing" / "m.zip"), ErrorCode::io,
                   "cannot open lock file");
  CHECK(err.context().archive.find(".m.zip.modelzip-lock") != std::string::npos);
}
