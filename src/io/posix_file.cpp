#include "io/posix_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "io/syscalls.hpp"

namespace modelzip::io {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

int UniqueFd::release() noexcept {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

Error errno_error(const std::string& what, ErrorContext context) {
  return Error::from_errno(what, errno, std::move(context));
}

void throw_errno(const std::filesystem::path& path, const std::string& what) {
  throw errno_error(what, ErrorContext{.archive = path.string()});
}

void require_regular_file(const struct stat& st, const std::filesystem::path& path) {
  if (S_ISREG(st.st_mode)) return;
  throw Error(ErrorCode::io,
              S_ISDIR(st.st_mode) ? "is a folder, not a file"
                                  : "is not a regular file (a device, pipe or socket)",
              ErrorContext{.archive = path.string()});
}

void pwrite_full(int fd, const void* data, std::uint64_t size, std::uint64_t offset,
                 ErrorContext context, const std::string& what) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(size, 1u << 30));
    const ssize_t w = sys::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = ENOSPC;
      context.offset = offset;
      throw errno_error(what, std::move(context));
    }
    p += w;
    offset += static_cast<std::uint64_t>(w);
    size -= static_cast<std::uint64_t>(w);
  }
}

std::size_t pread_full(int fd, void* out, std::size_t size, std::uint64_t offset,
                       const std::filesystem::path& path) {
  auto* p = static_cast<char*>(out);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, p + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw errno_error("cannot read",
                        ErrorContext{.archive = path.string(), .offset = offset + done});
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

}  // namespace modelzip::io
