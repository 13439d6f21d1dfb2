#include "io/syscalls.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace modelzip::io {
namespace {

std::atomic<FaultInjector*> g_injector{nullptr};

// Asks the injector (if any) about a call; sets errno and returns false when
// the call must fail.
bool allowed(SysOp op, std::size_t* size = nullptr) noexcept {
  FaultInjector* injector = g_injector.load(std::memory_order_acquire);
  if (!injector) return true;
  int error = injector->before(op, size);
  if (error == 0) return true;
  errno = error;
  return false;
}

// The injector if it records calls, else null.
FaultInjector* recorder() noexcept {
  FaultInjector* injector = g_injector.load(std::memory_order_acquire);
  return injector && injector->recording() ? injector : nullptr;
}

// Records a write of `n` bytes at `offset` that succeeded, when recording.
void record_write(int fd, const void* data, std::size_t n, std::uint64_t offset) {
  if (n > 0)
    if (auto* r = recorder())
      r->record({.op = SysOp::write,
                 .fd = fd,
                 .offset = offset,
                 .data = std::string(static_cast<const char*>(data), n)});
}

// The path behind a descriptor (for records of fsyncs, whose descriptor may
// come from an open for reading, which is not recorded).
std::string path_of_fd(int fd) {
  char buf[4096];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

}  // namespace

const char* sys_op_name(SysOp op) noexcept {
  switch (op) {
    case SysOp::open:
      return "open";
    case SysOp::write:
      return "write";
    case SysOp::fsync_file:
      return "fsync";
    case SysOp::fsync_dir:
      return "fsync (folder)";
    case SysOp::rename:
      return "rename";
    case SysOp::truncate:
      return "ftruncate";
    case SysOp::unlink:
      return "unlink";
    case SysOp::close:
      return "close";
  }
  return "?";
}

FaultInjector::~FaultInjector() {
  uninstall();
}

void FaultInjector::install() noexcept {
  g_injector.store(this, std::memory_order_release);
}

void FaultInjector::uninstall() noexcept {
  FaultInjector* self = this;
  g_injector.compare_exchange_strong(self, nullptr, std::memory_order_acq_rel);
}

std::vector<SysCallRecord> FaultInjector::records() const {
  std::lock_guard lock(records_mutex_);
  return records_;
}

void FaultInjector::record(SysCallRecord call) {
  std::lock_guard lock(records_mutex_);
  records_.push_back(std::move(call));
}

int FaultInjector::before(SysOp op, std::size_t* size) noexcept {
  const std::uint64_t total = ++total_;
  const std::uint64_t nth_of_kind = ++by_kind_[static_cast<int>(op)];
  const bool same_kind = plan_.any_kind || op == plan_.kind;
  if (failing_.load() && same_kind) return plan_.action == Action::disk_full ? ENOSPC : plan_.error;
  const bool hit =
      same_kind && plan_.nth != 0 && (plan_.any_kind ? total : nth_of_kind) == plan_.nth;
  if (!hit) return 0;
  switch (plan_.action) {
    case Action::count:
      return 0;
    case Action::kill:
      ::kill(::getpid(), SIGKILL);
      for (;;) ::pause();
    case Action::fail:
      fired_ = true;
      return plan_.error;
    case Action::fail_after:
      fired_ = true;
      failing_ = true;
      return plan_.error;
    case Action::short_write:
    case Action::disk_full:
      if (op != SysOp::write || !size) return 0;
      fired_ = true;
      if (plan_.action == Action::disk_full) failing_ = true;
      if (*size > 1) *size /= 2;
      return 0;
  }
  return 0;
}

namespace sys {

int open(const char* path, int flags, mode_t mode) {
  const bool writing = (flags & (O_WRONLY | O_RDWR)) != 0;
  if (writing && !allowed(SysOp::open)) return -1;
  const int fd = ::open(path, flags, mode);
  if (fd >= 0 && writing)
    if (auto* r = recorder())
      r->record({.op = SysOp::open, .fd = fd, .flags = flags, .path = path});
  return fd;
}

ssize_t write(int fd, const void* data, std::size_t size) {
  if (!allowed(SysOp::write, &size)) return -1;
  const ssize_t n = ::write(fd, data, size);
  if (n > 0 && recorder()) {
    const off_t end = ::lseek(fd, 0, SEEK_CUR);  // also right for O_APPEND
    record_write(fd, data, static_cast<std::size_t>(n), static_cast<std::uint64_t>(end - n));
  }
  return n;
}

ssize_t pwrite(int fd, const void* data, std::size_t size, off_t offset) {
  if (!allowed(SysOp::write, &size)) return -1;
  const ssize_t n = ::pwrite(fd, data, size, offset);
  if (n > 0)
    record_write(fd, data, static_cast<std::size_t>(n), static_cast<std::uint64_t>(offset));
  return n;
}

bool async_write_allowed(std::size_t* size) {
  return allowed(SysOp::write, size);
}

void async_write_done(int fd, const void* data, std::size_t n, off_t offset) {
  record_write(fd, data, n, static_cast<std::uint64_t>(offset));
}

ssize_t mapped_write(int fd, void* to, const void* data, std::size_t size, off_t offset) {
  if (!allowed(SysOp::write, &size)) return -1;
  if (size > 0) std::memcpy(to, data, size);
  record_write(fd, data, size, static_cast<std::uint64_t>(offset));
  return static_cast<ssize_t>(size);
}

int fsync(int fd) {
  if (!allowed(SysOp::fsync_file)) return -1;
  const int rc = ::fsync(fd);
  if (rc == 0)
    if (auto* r = recorder())
      r->record({.op = SysOp::fsync_file, .fd = fd, .path = path_of_fd(fd)});
  return rc;
}

int fsync_dir(int fd) {
  if (!allowed(SysOp::fsync_dir)) return -1;
  const int rc = ::fsync(fd);
  if (rc == 0)
    if (auto* r = recorder()) r->record({.op = SysOp::fsync_dir, .fd = fd, .path = path_of_fd(fd)});
  return rc;
}

int rename(const char* from, const char* to) {
  if (!allowed(SysOp::rename)) return -1;
  const int rc = ::rename(from, to);
  if (rc == 0)
    if (auto* r = recorder()) r->record({.op = SysOp::rename, .path = from, .to = to});
  return rc;
}

int ftruncate(int fd, off_t size) {
  if (!allowed(SysOp::truncate)) return -1;
  const int rc = ::ftruncate(fd, size);
  if (rc == 0)
    if (auto* r = recorder())
      r->record({.op = SysOp::truncate, .fd = fd, .offset = static_cast<std::uint64_t>(size)});
  return rc;
}

int unlink(const char* path) {
  if (!allowed(SysOp::unlink)) return -1;
  const int rc = ::unlink(path);
  if (rc == 0)
    if (auto* r = recorder()) r->record({.op = SysOp::unlink, .path = path});
  return rc;
}

int close(int fd) {
  // The descriptor is released even when the call "fails", as the real
  // close() does on Linux.
  if (!allowed(SysOp::close)) {
    int saved = errno;
    ::close(fd);
    errno = saved;
    if (auto* r = recorder()) r->record({.op = SysOp::close, .fd = fd});
    return -1;
  }
  const int rc = ::close(fd);
  if (auto* r = recorder()) r->record({.op = SysOp::close, .fd = fd});
  return rc;
}

}  // namespace sys
}  // namespace modelzip::io
