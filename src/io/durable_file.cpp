#include "io/durable_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <random>
#include <thread>

#include "io/posix_file.hpp"
#include "io/syscalls.hpp"
#include "modelzip/cancel.hpp"
#include "modelzip/error.hpp"

namespace modelzip::io {
namespace fs = std::filesystem;
namespace {

std::string temp_prefix(const fs::path& target) {
  return "." + target.filename().string() + ".mztmp-";
}

fs::path folder_of(const fs::path& target) {
  auto parent = target.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

}  // namespace

TempFile::TempFile(fs::path target, fs::path path)
    : target_(std::move(target)), path_(std::move(path)) {}

TempFile::TempFile(TempFile&& other) noexcept
    : target_(std::move(other.target_)),
      path_(std::move(other.path_)),
      committed_(other.committed_) {
  other.committed_ = true;
}

TempFile TempFile::beside(const fs::path& given) {
  struct stat st;  // follows every link (also /dev/stdout's to a pipe)
  if (::stat(given.c_str(), &st) == 0) require_regular_file(st, given);
  const fs::path target = resolve_archive_path(given);
  std::random_device rd;
  std::uint64_t r = (static_cast<std::uint64_t>(rd()) << 32) | rd();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(r));
  auto name = temp_prefix(target) + std::to_string(::getpid()) + "-" + hex;
  return TempFile(target, folder_of(target) / name);
}

TempFile::~TempFile() {
  if (committed_) return;
  sys::unlink(path_.c_str());
}

void sync_path(const fs::path& path, bool directory) {
  int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) throw_errno(path, "cannot open for fsync");
  int rc = directory ? sys::fsync_dir(fd) : sys::fsync(fd);
  int saved = errno;
  sys::close(fd);
  errno = saved;
  if (rc != 0) throw_errno(path, "fsync failed");
}

OutputFile::OutputFile(const fs::path& path) : path_(path) {
  fd_ = sys::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_errno(path, "cannot create file");
}

void fail_to_create(const fs::path& target) {
  const int errnum = errno;
  std::string why = std::strerror(errnum);
  // "Permission denied" -> "permission denied", in the sentence.
  if (!why.empty() && why[0] >= 'A' && why[0] <= 'Z' &&
      (why.size() < 2 || !std::isupper(static_cast<unsigned char>(why[1]))))
    why[0] = static_cast<char>(why[0] - 'A' + 'a');
  std::string folder = folder_of(target).string();
  if (folder.back() != '/') folder += '/';
  // The errno stays in the error (Python's PermissionError, FileNotFoundError...).
  const ErrorContext context{.archive = target.string()};
  throw Error::from_errno("cannot create", errnum, context)
      .reworded("cannot create " + target.filename().string() + " in " + folder + ": " + why,
                context);
}

OutputFile::OutputFile(const TempFile& temp) : path_(temp.target()) {
  fd_ = sys::open(temp.path().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) fail_to_create(temp.target());
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) sys::close(fd_);
}

void OutputFile::close() {
  int fd = fd_;
  fd_ = -1;
  if (sys::close(fd) != 0) throw_errno(path_, "cannot write file");
}

AppendFile::AppendFile(const fs::path& path) : path_(path) {
  fd_ = sys::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd_ < 0) throw_errno(path, "cannot open for appending");
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) sys::close(fd_);
}

void AppendFile::sync() {
  if (sys::fsync(fd_) != 0) throw_errno(path_, "fsync failed");
}

bool AppendFile::truncate(std::uint64_t size) noexcept {
  return sys::ftruncate(fd_, static_cast<off_t>(size)) == 0 && sys::fsync(fd_) == 0;
}

void AppendFile::close() {
  int fd = fd_;
  fd_ = -1;
  if (sys::close(fd) != 0) throw_errno(path_, "cannot write file");
}

void TempFile::commit(bool durable) {
  if (durable) {
    try {
      sync_path(path_, false);
    } catch (const Error& e) {
      throw Error(ErrorCode::io,
                  "cannot fsync the new version; the old one is unchanged: " + e.message(),
                  ErrorContext{.archive = target_.string()});
    }
  }
  if (sys::rename(path_.c_str(), target_.c_str()) != 0)
    throw_errno(target_,
                "cannot replace the archive (rename failed; the old version is unchanged)");
  committed_ = true;
  if (durable) {
    try {
      sync_path(folder_of(target_), true);
    } catch (const Error& e) {
      throw Error(ErrorCode::io,
                  "the new version replaced the old one, but fsync of its folder failed (the "
                  "replacement may not survive a power loss): " +
                      e.message(),
                  ErrorContext{.archive = target_.string()});
    }
  }
}

void remove_stale_temp_files(const fs::path& target) noexcept {
  std::error_code ec;
  const std::string prefix = temp_prefix(target);
  for (fs::directory_iterator it(folder_of(target), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    // ".<name>.mztmp-<pid>-<random>[...]": the writer's pid decides.
    const std::string rest = name.substr(prefix.size());
    char* end_ptr = nullptr;
    long pid = std::strtol(rest.c_str(), &end_ptr, 10);
    if (end_ptr == rest.c_str() || *end_ptr != '-' || pid <= 0) continue;
    if (pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      sys::unlink(it->path().c_str());
    }
  }
}

fs::path resolve_archive_path(const fs::path& path) {
  fs::path p = path;
  for (int links = 0; links <= 40; ++links) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    std::error_code ec;
    fs::path target = fs::read_symlink(p, ec);
    if (ec)
      throw Error(ErrorCode::io, "cannot read the symbolic link: " + ec.message(),
                  ErrorContext{.archive = path.string()});
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  throw Error(ErrorCode::io, "too many levels of symbolic links",
              ErrorContext{.archive = path.string()});
}

namespace {

// Closes a descriptor opened through io::sys (the archive's) or directly
// (the folder's, opened read-only: no file-changing call to record).
void close_fd(int fd, bool through_sys) {
  if (through_sys)
    sys::close(fd);
  else
    ::close(fd);
}

// Takes an exclusive lock of `fd`: first without blocking, then, if another
// writer holds it, after calling `on_wait` (once: `*waited` records it),
// blocking, retried on EINTR unless the wait is to stop (FileLock). Closes
// `fd` and throws on failure. The
// archive (`through_sys`, opened read-write) gets an open-file-description
// lock of the whole file (F_OFD_SETLK[W]): like flock it belongs to the
// descriptor, not the process, and unlike the flock emulation of NFS
// clients (process-wide fcntl locks, which closing any descriptor of the
// file releases) it survives the writer opening and closing the archive
// again to read it. The folder (read-only: no write lock possible) gets a
// flock.
void lock_or_fail(int fd, bool through_sys, const fs::path& target,
                  const std::function<void()>& on_wait, const std::function<bool()>& keep_waiting,
                  std::chrono::milliseconds poll, bool* waited) {
  auto lock = [&](bool block) {
    if (!through_sys) return ::flock(fd, LOCK_EX | (block ? 0 : LOCK_NB));
    struct flock whole {};
    whole.l_type = F_WRLCK;
    whole.l_whence = SEEK_SET;
    return ::fcntl(fd, block ? F_OFD_SETLKW : F_OFD_SETLK, &whole);
  };
  auto give_up = [&](const std::string& what) {
    int saved = errno;
    close_fd(fd, through_sys);
    errno = saved;
    throw_errno(target, what);
  };
  if (lock(false) == 0) return;
  // Held by another writer: EWOULDBLOCK (flock), EAGAIN or EACCES (fcntl).
  if (errno != EWOULDBLOCK && errno != EAGAIN && errno != EACCES && errno != EINTR)
    give_up("cannot lock the archive for writing");
  if (!*waited) {
    *waited = true;
    if (on_wait) on_wait();
  }
  auto stop_waiting = [&] {
    close_fd(fd, through_sys);
    throw Error(ErrorCode::cancelled, "cancelled while waiting for the archive's lock",
                ErrorContext{.archive = target.string()});
  };
  if (poll.count() > 0 && keep_waiting) {
    for (;;) {
      if (cancel_requested() || !keep_waiting()) stop_waiting();
      std::this_thread::sleep_for(poll);
      if (lock(false) == 0) return;
      if (errno != EWOULDBLOCK && errno != EAGAIN && errno != EACCES && errno != EINTR)
        give_up("cannot lock the archive for writing");
    }
  }
  while (lock(true) != 0) {
    if (errno == EINTR && !cancel_requested() && (!keep_waiting || keep_waiting())) continue;
    if (errno == EINTR) stop_waiting();  // a signal asked to stop waiting
    give_up("cannot lock the archive for writing");
  }
}

// How often a writer looks again when the archive was replaced or created
// while it waited: each time, another writer's commit finished.
constexpr int kLockAttempts = 10000;

}  // namespace

FileLock::FileLock(const fs::path& target, const std::function<void()>& on_wait,
                   const std::function<bool()>& keep_waiting, std::chrono::milliseconds poll) {
  bool waited = false;
  for (int attempt = 0; attempt < kLockAttempts; ++attempt) {
    int fd = sys::open(target.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      struct stat locked;
      if (::fstat(fd, &locked) != 0 || !S_ISREG(locked.st_mode)) {
        sys::close(fd);
        throw Error(ErrorCode::io, "not a regular file", ErrorContext{.archive = target.string()});
      }
      lock_or_fail(fd, true, target, on_wait, keep_waiting, poll, &waited);
      struct stat now;
      if (::stat(target.c_str(), &now) == 0 && now.st_dev == locked.st_dev &&
          now.st_ino == locked.st_ino) {
        fd_ = fd;
        archive_ = true;
        return;
      }
      sys::close(fd);  // replaced (or removed) meanwhile: look again
      continue;
    }
    if (errno == EACCES || errno == EPERM || errno == EROFS)
      throw_errno(target, "cannot modify the archive (this user may not write it)");
    if (errno == ELOOP)
      throw_errno(target,
                  "cannot modify the archive (it became a symbolic link while being opened)");
    if (errno != ENOENT) throw_errno(target, "cannot open the archive for writing");
    const fs::path folder = folder_of(target);
    int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) throw_errno(target, "cannot open the archive's folder");
    lock_or_fail(dir, false, target, on_wait, keep_waiting, poll, &waited);
    struct stat st;
    if (::lstat(target.c_str(), &st) != 0 && errno == ENOENT) {
      fd_ = dir;
      return;
    }
    ::close(dir);  // created meanwhile: lock that file instead
  }
  throw Error(ErrorCode::io,
              "cannot lock the archive for writing: it was replaced " +
                  std::to_string(kLockAttempts) + " times while this writer waited",
              ErrorContext{.archive = target.string()});
}

void keep_attributes(int from, int to, const fs::path& target) {
  struct stat old, now;
  if (::fstat(from, &old) != 0 || ::fstat(to, &now) != 0)
    throw_errno(target, "cannot read the archive's permissions");
  if (old.st_uid != now.st_uid || old.st_gid != now.st_gid) {
    if (::fchown(to, old.st_uid, old.st_gid) != 0) {
      // Not allowed to give the file away: the group alone may still be
      // ours to set (a group this user belongs to).
      if (old.st_gid != now.st_gid) (void)::fchown(to, static_cast<uid_t>(-1), old.st_gid);
      if (::fstat(to, &now) != 0) throw_errno(target, "cannot read the archive's permissions");
      if (old.st_uid != now.st_uid || old.st_gid != now.st_gid)
        throw Error(ErrorCode::io,
                    "cannot rewrite the archive without changing its owner or group (it belongs "
                    "to user " +
                        std::to_string(old.st_uid) + ", group " + std::to_string(old.st_gid) +
                        "; this user may not give a file to them); the archive is unchanged: run "
                        "the command as its owner",
                    ErrorContext{.archive = target.string()});
    }
  }
  // After fchown, which clears set-user/group-ID bits.
  if (::fchmod(to, old.st_mode & 07777) != 0)
    throw_errno(target, "cannot set the archive's permissions");
}

FileLock::FileLock(FileLock&& other) noexcept : fd_(other.fd_), archive_(other.archive_) {
  other.fd_ = -1;
}

FileLock::~FileLock() {
  if (fd_ >= 0) close_fd(fd_, archive_);
}

}  // namespace modelzip::io
