#include "io/durable_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "io/syscalls.hpp"
#include "modelzip/cancel.hpp"
#include "modelzip/error.hpp"

namespace modelzip::io {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void fail(const fs::path& path, const std::string& what) {
  throw Error(ErrorCode::io, what + ": " + std::strerror(errno),
              ErrorContext{.archive = path.string()});
}

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

TempFile TempFile::beside(const fs::path& target) {
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
  if (fd < 0) fail(path, "cannot open for fsync");
  int rc = directory ? sys::fsync_dir(fd) : sys::fsync(fd);
  int saved = errno;
  sys::close(fd);
  errno = saved;
  if (rc != 0) fail(path, "fsync failed");
}

OutputFile::OutputFile(const fs::path& path) : path_(path) {
  fd_ = sys::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(path, "cannot create file");
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) sys::close(fd_);
}

void OutputFile::close() {
  int fd = fd_;
  fd_ = -1;
  if (sys::close(fd) != 0) fail(path_, "cannot write file");
}

AppendFile::AppendFile(const fs::path& path) : path_(path) {
  fd_ = sys::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd_ < 0) fail(path, "cannot open for appending");
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) sys::close(fd_);
}

void AppendFile::sync() {
  if (sys::fsync(fd_) != 0) fail(path_, "fsync failed");
}

bool AppendFile::truncate(std::uint64_t size) noexcept {
  return sys::ftruncate(fd_, static_cast<off_t>(size)) == 0 && sys::fsync(fd_) == 0;
}

void AppendFile::close() {
  int fd = fd_;
  fd_ = -1;
  if (sys::close(fd) != 0) fail(path_, "cannot write file");
}

void TempFile::commit(bool durable) {
  if (durable) {
    try {
      sync_path(path_, false);
    } catch (const Error& e) {
      throw Error(ErrorCode::io,
                  "cannot fsync the new version (" + path_.filename().string() +
                      "); the old one is unchanged: " + e.message(),
                  ErrorContext{.archive = target_.string()});
    }
  }
  if (sys::rename(path_.c_str(), target_.c_str()) != 0)
    fail(target_, "cannot replace the archive (rename failed; the old version is unchanged)");
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

FileLock::FileLock(const fs::path& target) {
  auto lock_path = folder_of(target) / ("." + target.filename().string() + ".modelzip-lock");
  fd_ = sys::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(lock_path, "cannot open lock file");
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR && !cancel_requested()) continue;
    if (errno == EINTR) {  // a signal asked to stop waiting (modelzip/cancel.hpp)
      ::close(fd_);
      throw Error(ErrorCode::cancelled, "cancelled while waiting for the archive's lock",
                  ErrorContext{.archive = target.string()});
    }
    int saved = errno;
    ::close(fd_);
    errno = saved;
    fail(lock_path, "cannot lock");
  }
}

FileLock::FileLock(FileLock&& other) noexcept : fd_(other.fd_) {
  other.fd_ = -1;
}

FileLock::~FileLock() {
  if (fd_ >= 0) sys::close(fd_);
}

}  // namespace modelzip::io
