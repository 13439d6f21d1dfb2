// Small POSIX building blocks shared by the io, zip, dist, remote and cli
// layers: an owning file descriptor, errno turned into modelzip::Error (the
// one way to do that: errno_error / throw_errno), and full positional reads
// and writes that retry short transfers and EINTR.
//
// Errors: every function throws modelzip::Error (ErrorCode::io) whose
// message is "<what>: <strerror(errno)>" and whose context is the caller's
// (archive or file name, plus the byte offset for reads and writes).
// Thread safety: the functions keep no state; UniqueFd is a value type.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "modelzip/error.hpp"

namespace modelzip::io {

// An open file descriptor, closed by the destructor; move-only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  // Gives up ownership without closing.
  int release() noexcept;

 private:
  int fd_ = -1;
};

// The Error for a failed system call: "<what>: <strerror(errno)>", with
// system_error() = errno (Error::from_errno). Reads errno, so call it before
// anything else can change errno.
Error errno_error(const std::string& what, ErrorContext context);

// Throws errno_error(what, {.archive = path}).
[[noreturn]] void throw_errno(const std::filesystem::path& path, const std::string& what);

// Throws a plain sentence (not strerror's "Invalid argument") unless `st`
// describes a regular file: "is a folder, not a file" or "is not a regular
// file (a device, pipe or socket)", naming `path`.
void require_regular_file(const struct stat& st, const std::filesystem::path& path);

// Writes all `size` bytes at `offset` through io::sys::pwrite (so fault
// injection sees every write). A write of 0 bytes counts as ENOSPC. The
// error says "<what>: ..." and carries `context` with the failing offset.
void pwrite_full(int fd, const void* data, std::uint64_t size, std::uint64_t offset,
                 ErrorContext context, const std::string& what = "cannot write");

// Reads up to `size` bytes at `offset` into `out`, stopping early only at
// the end of the file; returns the number of bytes read.
std::size_t pread_full(int fd, void* out, std::size_t size, std::uint64_t offset,
                       const std::filesystem::path& path);

}  // namespace modelzip::io
