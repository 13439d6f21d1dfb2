// io/atomic_write: a file written through a stream replaces its target all
// at once; every failure (creation, a write, the close, the writer's own
// error) leaves the target unchanged and no temporary file, and names the
// user's path, never the temporary file.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <ostream>
#include <set>
#include <string>

#include "../zip/expect_error.hpp"
#include "io/atomic_write.hpp"
#include "io/syscalls.hpp"
#include "modelzip/cancel.hpp"
#include "modelzip/error.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;
namespace fs = std::filesystem;
using Action = io::FaultInjector::Action;

namespace {

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

// 3 MiB + 5 bytes of a repeating pattern, written in small and large
// pieces (the stream's buffer is 1 MiB): the bytes the target must hold.
std::string pattern() {
  std::string s(3 * (1u << 20) + 5, '\0');
  for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>('a' + i % 23);
  return s;
}

void write_pattern(std::ostream& out) {
  const std::string s = pattern();
  out.write(s.data(), 7);                                          // buffered
  out.write(s.data() + 7, (1 << 20) - 7);                          // large: straight through
  for (std::size_t i = 1 << 20; i < s.size(); ++i) out.put(s[i]);  // one at a time
}

// Runs a failing write of `dir / "a.bin"` (which holds "old") and checks
// what every failure must leave: the old target, no temporary file, an
// Error(io) naming the target and not the temporary file.
Error failed_write(const fs::path& dir, const std::function<void()>& run) {
  write_file(dir / "a.bin", "old");
  auto e = caught(run);
  REQUIRE(e.has_value());
  CHECK(e->code() == ErrorCode::io);
  CHECK(std::string(e->what()).find((dir / "a.bin").string()) != std::string::npos);
  CHECK(std::string(e->what()).find(".mztmp") == std::string::npos);
  CHECK(io_bytes(dir / "a.bin") == "old");
  CHECK(files_in(dir) == std::set<std::string>{"a.bin"});
  return *e;
}

}  // namespace

TEST_CASE("write_file_atomically: replaces the target with exactly what was written") {
  TempDir dir;
  write_file(dir / "a.bin", "old");
  for (bool durable : {true, false}) {
    CAPTURE(durable);
    io::FaultInjector counter;
    counter.install();
    io::write_file_atomically(dir / "a.bin", write_pattern, durable);
    counter.uninstall();
    CHECK(io_bytes(dir / "a.bin") == pattern());
    CHECK(files_in(dir.path()) == std::set<std::string>{"a.bin"});
    // Through io::sys: 1 MiB pieces and the rest, one close; fsyncs only when durable.
    CHECK(counter.calls(io::SysOp::write) >= 3);
    CHECK(counter.calls(io::SysOp::rename) == 1);
    CHECK(counter.calls(io::SysOp::fsync_file) == (durable ? 1u : 0u));
    CHECK(counter.calls(io::SysOp::fsync_dir) == (durable ? 1u : 0u));
  }
  io::write_file_atomically(
      dir / "new.bin", [](std::ostream&) {}, true);  // an empty new file
  CHECK(io_bytes(dir / "new.bin").empty());
}

TEST_CASE("write_file_atomically: deletes the temporary files a killed writer left") {
  TempDir dir;
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  int status = 0;
  ::waitpid(dead, &status, 0);
  const std::string stale = ".a.bin.mztmp-" + std::to_string(dead) + "-0123456789abcdef";
  const std::string live = ".a.bin.mztmp-" + std::to_string(::getppid()) + "-0123456789abcdef";
  write_file(dir / stale, "half");
  write_file(dir / live, "in use");  // a running process's: kept
  io::write_file_atomically(dir / "a.bin", write_pattern, false);
  CHECK(files_in(dir.path()) == std::set<std::string>{"a.bin", live});
}

TEST_CASE("write_file_atomically: a failed write reports the system's reason and the offset") {
  TempDir dir;
  // The second write (the first one goes through at 1 MiB) fails: ENOSPC.
  io::FaultInjector injector(
      {.action = Action::fail, .kind = io::SysOp::write, .nth = 2, .error = ENOSPC});
  const Error e = failed_write(dir.path(), [&] {
    injector.install();
    io::write_file_atomically(dir / "a.bin", write_pattern, true);
  });
  injector.uninstall();
  CHECK(injector.fired());
  CHECK(e.system_error() == ENOSPC);
  CHECK(e.message().find("cannot write") == 0);
  CHECK(e.context().offset.has_value());
}

TEST_CASE("write_file_atomically: a failed close leaves the target unchanged") {
  TempDir dir;
  // The first close is the new file's (OutputFile::close), before the commit.
  io::FaultInjector injector({.action = Action::fail, .kind = io::SysOp::close, .nth = 1});
  const Error e = failed_write(dir.path(), [&] {
    injector.install();
    io::write_file_atomically(dir / "a.bin", write_pattern, false);
  });
  injector.uninstall();
  CHECK(injector.fired());
  CHECK(e.system_error() == EIO);
}

TEST_CASE("write_file_atomically: the writer's error gets the path; creation failures name it") {
  TempDir dir;
  const Error e = failed_write(dir.path(), [&] {
    io::write_file_atomically(
        dir / "a.bin",
        [](std::ostream& out) {
          out << "partial";
          throw Error(ErrorCode::io, "the writer gave up");
        },
        true);
  });
  CHECK(e.message() == "the writer gave up");
  CHECK(e.context().archive == (dir / "a.bin").string());

  CHECK_ERROR(io::write_file_atomically(dir / "missing" / "a.bin", write_pattern, true),
              ErrorCode::io, "cannot create a.bin in " + (dir / "missing").string() + "/");
}

// modelzip/cancel.hpp (the CLI's Ctrl-C during export): a write stops before
// its next piece, or, when the request comes after the last one, before the
// rename; the target keeps its old bytes and no temporary file stays.
TEST_CASE("write_file_atomically: a cancellation request leaves the target unchanged") {
  TempDir dir;
  for (const bool after_the_last_piece : {false, true}) {
    CAPTURE(after_the_last_piece);
    write_file(dir / "a.bin", "old");
    auto e = caught([&] {
      io::write_file_atomically(
          dir / "a.bin",
          [&](std::ostream& out) {
            write_pattern(out);
            if (!after_the_last_piece) request_cancel();
            write_pattern(out);
            out.flush();
            if (after_the_last_piece) request_cancel();
          },
          true);
    });
    CHECK(cancel_requested());
    clear_cancel();
    REQUIRE(e.has_value());
    CHECK(e->code() == ErrorCode::cancelled);
    CHECK(e->context().archive == (dir / "a.bin").string());
    CHECK(io_bytes(dir / "a.bin") == "old");
    CHECK(files_in(dir.path()) == std::set<std::string>{"a.bin"});
  }
}
