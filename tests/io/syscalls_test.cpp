// io/syscalls: the fault-injection seam counts calls, fails the planned one,
// shortens writes, fills the disk, and is inert when uninstalled.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <signal.h>
#include <cerrno>

#include "io/syscalls.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;
using Action = io::FaultInjector::Action;

namespace {

int create(const std::filesystem::path& p) {
  return io::sys::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

}  // namespace

TEST_CASE("Syscalls: without an injector the calls reach the OS") {
  TempDir dir;
  int fd = create(dir / "f");
  REQUIRE(fd >= 0);
  CHECK(io::sys::write(fd, "abc", 3) == 3);
  CHECK(io::sys::pwrite(fd, "Z", 1, 1) == 1);
  CHECK(io::sys::fsync(fd) == 0);
  CHECK(io::sys::ftruncate(fd, 2) == 0);
  CHECK(io::sys::close(fd) == 0);
  CHECK(io_bytes(dir / "f") == "aZ");
  CHECK(io::sys::rename((dir / "f").c_str(), (dir / "g").c_str()) == 0);
  CHECK(io::sys::unlink((dir / "g").c_str()) == 0);
  CHECK(io::sys::unlink((dir / "g").c_str()) == -1);
  CHECK(errno == ENOENT);
}

TEST_CASE("Syscalls: an injector counts every call by kind and in total") {
  TempDir dir;
  io::FaultInjector counter;
  counter.install();
  int fd = create(dir / "f");
  io::sys::write(fd, "ab", 2);
  io::sys::pwrite(fd, "c", 1, 2);
  io::sys::fsync(fd);
  io::sys::close(fd);
  int ro = io::sys::open((dir / "f").c_str(), O_RDONLY | O_CLOEXEC);  // reads are not counted
  io::sys::close(ro);
  counter.uninstall();
  io::sys::unlink((dir / "f").c_str());  // after uninstall: not counted
  CHECK(counter.calls(io::SysOp::open) == 1);
  CHECK(counter.calls(io::SysOp::write) == 2);
  CHECK(counter.calls(io::SysOp::fsync_file) == 1);
  CHECK(counter.calls(io::SysOp::close) == 2);
  CHECK(counter.calls(io::SysOp::unlink) == 0);
  CHECK(counter.total_calls() == 6);
  CHECK_FALSE(counter.fired());
  CHECK_FALSE(std::filesystem::exists(dir / "f"));
}

TEST_CASE("Syscalls: the planned call fails with the planned errno, the others pass") {
  TempDir dir;
  int fd = create(dir / "f");
  io::FaultInjector injector(
      {.action = Action::fail, .kind = io::SysOp::write, .nth = 2, .error = ENOSPC});
  injector.install();
  CHECK(io::sys::write(fd, "a", 1) == 1);
  errno = 0;
  CHECK(io::sys::write(fd, "b", 1) == -1);
  CHECK(errno == ENOSPC);
  CHECK(injector.fired());
  CHECK(io::sys::write(fd, "c", 1) == 1);
  CHECK(io::sys::fsync(fd) == 0);
  injector.uninstall();
  io::sys::close(fd);
  CHECK(io_bytes(dir / "f") == "ac");
}

TEST_CASE("Syscalls: fail_after, short writes and a filling disk") {
  TempDir dir;
  int fd = create(dir / "f");
  {
    io::FaultInjector injector({.action = Action::short_write, .kind = io::SysOp::write, .nth = 1});
    injector.install();
    CHECK(io::sys::write(fd, "abcd", 4) == 2);
    CHECK(io::sys::write(fd, "ef", 2) == 2);
  }
  CHECK(io_bytes(dir / "f") == "abef");
  {
    io::FaultInjector injector({.action = Action::disk_full, .kind = io::SysOp::write, .nth = 2});
    injector.install();
    CHECK(io::sys::write(fd, "g", 1) == 1);
    CHECK(io::sys::write(fd, "hijk", 4) == 2);
    CHECK(io::sys::write(fd, "l", 1) == -1);
    CHECK(errno == ENOSPC);
    CHECK(io::sys::fsync(fd) == 0);  // other kinds still work
  }
  CHECK(io_bytes(dir / "f") == "abefghi");
  {
    io::FaultInjector injector(
        {.action = Action::fail_after, .kind = io::SysOp::fsync_file, .nth = 1, .error = EIO});
    injector.install();
    CHECK(io::sys::fsync(fd) == -1);
    CHECK(io::sys::fsync(fd) == -1);
    CHECK(errno == EIO);
    CHECK(io::sys::fsync_dir(fd) == 0);  // a different kind
  }
  CHECK(io::sys::fsync(fd) == 0);  // the destructor uninstalled it
  io::sys::close(fd);
}

TEST_CASE("Syscalls: a kill plan kills the process right before the call") {
  TempDir dir;
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    io::FaultInjector injector({.action = Action::kill, .any_kind = true, .nth = 3});
    injector.install();
    int fd = create(dir / "f");  // 1
    io::sys::write(fd, "a", 1);  // 2
    io::sys::write(fd, "b", 1);  // 3: killed before it
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  CHECK(io_bytes(dir / "f") == "a");
}
