#include "io/syscalls.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

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
  if ((flags & (O_WRONLY | O_RDWR)) != 0 && !allowed(SysOp::open)) return -1;
  return ::open(path, flags, mode);
}

ssize_t write(int fd, const void* data, std::size_t size) {
  if (!allowed(SysOp::write, &size)) return -1;
  return ::write(fd, data, size);
}

ssize_t pwrite(int fd, const void* data, std::size_t size, off_t offset) {
  if (!allowed(SysOp::write, &size)) return -1;
  return ::pwrite(fd, data, size, offset);
}

int fsync(int fd) {
  if (!allowed(SysOp::fsync_file)) return -1;
  return ::fsync(fd);
}

int fsync_dir(int fd) {
  if (!allowed(SysOp::fsync_dir)) return -1;
  return ::fsync(fd);
}

int rename(const char* from, const char* to) {
  if (!allowed(SysOp::rename)) return -1;
  return ::rename(from, to);
}

int ftruncate(int fd, off_t size) {
  if (!allowed(SysOp::truncate)) return -1;
  return ::ftruncate(fd, size);
}

int unlink(const char* path) {
  if (!allowed(SysOp::unlink)) return -1;
  return ::unlink(path);
}

int close(int fd) {
  // The descriptor is released even when the call "fails", as the real
  // close() does on Linux.
  if (!allowed(SysOp::close)) {
    int saved = errno;
    ::close(fd);
    errno = saved;
    return -1;
  }
  return ::close(fd);
}

}  // namespace sys
}  // namespace modelzip::io
