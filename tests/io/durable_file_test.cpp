// io/durable_file: TempFile commit and cleanup, OutputFile / AppendFile,
// remove_stale_temp_files (only dead writers' files), FileLock (excludes
// other processes without creating a file; follows a replaced archive),
// resolve_archive_path, keep_attributes.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
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
  CHECK(io_bytes(target) == "old");
  CHECK(files_in(dir.path()) == std::set<std::string>{"m.zip"});
}

TEST_CASE("TempFile: a folder, pipe or device is never replaced; a symbolic link stays a link") {
  TempDir dir;
  auto folder = dir / "folder.zip";
  fs::create_directory(folder);
  write_file(folder / "inside", "x");
  REQUIRE_ERROR_AS(err, io::TempFile::beside(folder), ErrorCode::io, "is a folder, not a file");
  CHECK(err.context().archive == folder.string());
  auto fifo = dir / "fifo.npz";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  CHECK_ERROR(io::TempFile::beside(fifo), ErrorCode::io, "is not a regular file");
  auto link = dir / "link.npz";  // leads to the pipe
  fs::create_symlink("fifo.npz", link);
  CHECK_ERROR(io::TempFile::beside(link), ErrorCode::io, "is not a regular file");
  CHECK(fs::is_fifo(fifo));
  CHECK(io_bytes(folder / "inside") == "x");

  // A link to a file: the file is replaced, the link stays.
  fs::create_directory(dir / "real");
  write_file(dir / "real" / "w.npz", "old");
  auto to_file = dir / "w.npz";
  fs::create_symlink("real/w.npz", to_file);
  {
    io::TempFile t = io::TempFile::beside(to_file);
    CHECK(t.path().parent_path() == dir / "real");
    write_file(t.path(), "new");
    t.commit(true);
  }
  CHECK(fs::is_symlink(to_file));
  CHECK(io_bytes(dir / "real" / "w.npz") == "new");
  CHECK(files_in(dir / "real") == std::set<std::string>{"w.npz"});
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

namespace {

// Runs `body` in a forked child; its return value (or 99 if it threw, 98
// for any other exception) is the child's exit status, which is returned.
int in_child(const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int code = 98;
    try {
      code = body();
    } catch (const Error& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      code = 99;
    } catch (...) {
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// In a child: become user and group "nobody" (65534) if running as root, so
// that permission checks apply (root may write anything).
bool drop_root() {
  if (::geteuid() != 0) return true;
  return ::setgroups(0, nullptr) == 0 && ::setgid(65534) == 0 && ::setuid(65534) == 0;
}

// A child that takes FileLock(target) once `go` is written, reports 'r'
// (ready) before locking and then 'a' (archive locked: and the inode it
// locked as 8 bytes) or 'f' (folder locked), then holds it until killed.
struct LockingChild {
  pid_t pid = -1;
  int go[2], out[2];
  explicit LockingChild(const fs::path& target) {
    REQUIRE(::pipe(go) == 0);
    REQUIRE(::pipe(out) == 0);
    pid = ::fork();
    if (pid == 0) {
      ::close(go[1]);
      ::close(out[0]);
      char c = 0;
      if (::read(go[0], &c, 1) != 1) ::_exit(3);
      c = 'r';
      (void)!::write(out[1], &c, 1);
      try {
        io::FileLock lock(target);
        std::uint64_t inode = 0;
        if (lock.archive_fd() >= 0) {
          struct stat st;
          ::fstat(lock.archive_fd(), &st);
          inode = st.st_ino;
        }
        char msg[9];
        msg[0] = lock.archive_fd() >= 0 ? 'a' : 'f';
        std::memcpy(msg + 1, &inode, 8);
        (void)!::write(out[1], msg, 9);
        ::pause();
      } catch (...) {
        ::_exit(2);
      }
      ::_exit(0);
    }
    ::close(go[0]);
    ::close(out[1]);
  }
  // Lets the child try to lock; returns once it is about to.
  void start() {
    char c = 'g';
    REQUIRE(::write(go[1], &c, 1) == 1);
    REQUIRE(::read(out[0], &c, 1) == 1);
    REQUIRE(c == 'r');
  }
  // True if the child reported a lock within `ms` milliseconds.
  bool locked_within(int ms) {
    pollfd p{out[0], POLLIN, 0};
    return ::poll(&p, 1, ms) == 1;
  }
  // What the child locked: 'a' and its inode, or 'f'.
  std::pair<char, std::uint64_t> report() {
    char msg[9] = {};
    REQUIRE(::read(out[0], msg, 9) == 9);
    std::uint64_t inode;
    std::memcpy(&inode, msg + 1, 8);
    return {msg[0], inode};
  }
  ~LockingChild() {
    if (pid > 0) kill_child(pid);
    ::close(go[1]);
    ::close(out[0]);
  }
};

std::uint64_t inode_of(const fs::path& p) {
  struct stat st;
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_ino;
}

}  // namespace

TEST_CASE("FileLock: locks the archive itself, creates no file, excludes others until released") {
  TempDir dir;
  auto target = dir / "m.zip";
  write_file(target, "archive");
  // The child is forked before the parent locks: a flock lock belongs to the
  // open file description, which a child forked later would share.
  LockingChild child(target);
  auto lock = std::make_unique<io::FileLock>(target);
  CHECK(lock->archive_fd() >= 0);
  CHECK(files_in(dir.path()) == std::set<std::string>{"m.zip"});
  child.start();
  CHECK_FALSE(child.locked_within(500));  // the child is trying to lock: it must wait
  lock.reset();
  REQUIRE(child.locked_within(10000));
  CHECK(child.report() == std::make_pair('a', inode_of(target)));
  CHECK(files_in(dir.path()) == std::set<std::string>{"m.zip"});
}

TEST_CASE("FileLock: a lock dies with its process") {
  TempDir dir;
  auto target = dir / "m.zip";
  write_file(target, "archive");
  {
    LockingChild holder(target);
    holder.start();
    REQUIRE(holder.locked_within(10000));
  }                            // killed
  io::FileLock after(target);  // would block forever if the lock survived
  io::FileLock moved(std::move(after));
  CHECK(moved.archive_fd() >= 0);
}

TEST_CASE("FileLock: a writer that waited on a replaced archive locks the new file") {
  TempDir dir;
  auto target = dir / "m.zip";
  write_file(target, "old");
  LockingChild child(target);
  auto lock = std::make_unique<io::FileLock>(target);
  child.start();
  CHECK_FALSE(child.locked_within(300));  // waits on the old file
  // A rewrite: the new version is renamed over the archive under the lock.
  write_file(dir / "new", "new");
  REQUIRE(::rename((dir / "new").c_str(), target.c_str()) == 0);
  // The new file is not locked by anyone: another writer gets it at once,
  // while the old one is still locked.
  CHECK(in_child([&] {
          io::FileLock other(target);
          struct stat st;
          ::fstat(other.archive_fd(), &st);
          return st.st_ino == inode_of(target) ? 0 : 1;
        }) == 0);
  lock.reset();
  REQUIRE(child.locked_within(10000));
  CHECK(child.report() == std::make_pair('a', inode_of(target)));
}

TEST_CASE("FileLock: a first save locks the folder; a waiting writer then locks the new archive") {
  TempDir dir;
  auto target = dir / "m.zip";
  LockingChild child(target);
  auto lock = std::make_unique<io::FileLock>(target);
  CHECK(lock->archive_fd() == -1);
  CHECK(files_in(dir.path()).empty());
  child.start();
  CHECK_FALSE(child.locked_within(300));
  write_file(target, "first");  // the first save creates the archive
  lock.reset();
  REQUIRE(child.locked_within(10000));
  CHECK(child.report() == std::make_pair('a', inode_of(target)));
  // A first save that failed leaves the folder as it was.
  TempDir empty;
  { io::FileLock first(empty / "m.zip"); }
  CHECK(files_in(empty.path()).empty());
}

TEST_CASE("FileLock: refusals name the archive") {
  TempDir dir;
  REQUIRE_ERROR_AS(err, io::FileLock(dir / "missing" / "m.zip"), ErrorCode::io,
                   "cannot open the archive's folder");
  CHECK(err.context().archive == (dir / "missing" / "m.zip").string());
  fs::create_directory(dir / "sub");
  REQUIRE_ERROR_AS(err2, io::FileLock(dir / "sub"), ErrorCode::io, "");
  CHECK(err2.context().archive == (dir / "sub").string());
  // A symbolic link must have been resolved (io::resolve_archive_path).
  write_file(dir / "real.zip", "x");
  fs::create_symlink("real.zip", dir / "link.zip");
  REQUIRE_ERROR_AS(err3, io::FileLock(dir / "link.zip"), ErrorCode::io, "symbolic link");
  // An archive this user may not write: refused before anything happens
  // (root may write a 0444 file, so the check runs as "nobody").
  fs::permissions(dir.path(), fs::perms::all);
  write_file(dir / "ro.zip", "x");
  REQUIRE(::chmod((dir / "ro.zip").c_str(), 0444) == 0);
  CHECK(in_child([&] {
          if (!drop_root()) return 2;
          try {
            io::FileLock l(dir / "ro.zip");
          } catch (const Error& e) {
            return std::string(e.what()).find("this user may not write it") != std::string::npos &&
                           e.context().archive == (dir / "ro.zip").string()
                       ? 0
                       : 3;
          }
          return 4;
        }) == 0);
}

TEST_CASE("resolve_archive_path follows links in the last component, relative to their folder") {
  TempDir dir;
  fs::create_directory(dir / "data");
  write_file(dir / "data" / "real.zip", "x");
  fs::create_symlink("data/real.zip", dir / "a.zip");         // relative
  fs::create_symlink(dir / "a.zip", dir / "data" / "b.zip");  // absolute, to a link
  fs::create_symlink("../a.zip", dir / "data" / "c.zip");     // relative with ..
  fs::create_symlink("gone.zip", dir / "dangling.zip");       // a first save creates gone.zip
  CHECK(io::resolve_archive_path(dir / "a.zip") == dir / "data/real.zip");
  CHECK(fs::equivalent(io::resolve_archive_path(dir / "data" / "b.zip"), dir / "data/real.zip"));
  CHECK(fs::equivalent(io::resolve_archive_path(dir / "data" / "c.zip"), dir / "data/real.zip"));
  CHECK(io::resolve_archive_path(dir / "dangling.zip") == dir / "gone.zip");
  CHECK(io::resolve_archive_path(dir / "data" / "real.zip") == dir / "data" / "real.zip");
  CHECK(io::resolve_archive_path(dir / "none.zip") == dir / "none.zip");
  fs::create_symlink("loop2", dir / "loop1");
  fs::create_symlink("loop1", dir / "loop2");
  REQUIRE_ERROR_AS(err, io::resolve_archive_path(dir / "loop1"), ErrorCode::io,
                   "too many levels of symbolic links");
  CHECK(err.context().archive == (dir / "loop1").string());
}

TEST_CASE(
    "keep_attributes: mode, owner and group of the old file; refused if they cannot be kept") {
  TempDir dir;
  fs::permissions(dir.path(), fs::perms::all);
  write_file(dir / "old", "x");
  write_file(dir / "new", "y");
  auto attributes = [](const fs::path& p) {
    struct stat st;
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return std::make_tuple(st.st_mode & 07777, st.st_uid, st.st_gid);
  };
  auto keep = [&] {
    int from = ::open((dir / "old").c_str(), O_RDONLY);
    int to = ::open((dir / "new").c_str(), O_RDONLY);
    struct Closer {
      int a, b;
      ~Closer() {
        ::close(a);
        ::close(b);
      }
    } closer{from, to};
    io::keep_attributes(from, to, dir / "m.zip");
  };
  for (mode_t mode : {0600, 0640, 0444, 0755, 02750}) {
    REQUIRE(::chmod((dir / "old").c_str(), mode) == 0);
    keep();
    CHECK(attributes(dir / "new") == attributes(dir / "old"));
  }
  if (::geteuid() == 0) {  // root may give files away: owner and group follow
    REQUIRE(::chown((dir / "old").c_str(), 12345, 54321) == 0);
    keep();
    CHECK(attributes(dir / "new") == attributes(dir / "old"));
    // An unprivileged writer cannot: refused, naming the archive. (Its new
    // file belongs to it; the old one to 12345.)
    REQUIRE(::chmod((dir / "old").c_str(), 0666) == 0);
    CHECK(in_child([&] {
            if (!drop_root()) return 2;
            fs::remove(dir / "new");
            write_file(dir / "new", "y");
            try {
              keep();
            } catch (const Error& e) {
              return std::string(e.what()).find("without changing its owner or group") !=
                                 std::string::npos &&
                             e.context().archive == (dir / "m.zip").string()
                         ? 0
                         : 3;
            }
            return 4;
          }) == 0);
  }
}
