#include "io/file_identity.hpp"
#include "io/posix_file.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "modelzip/error.hpp"

namespace modelzip::io {

std::optional<FileIdentity> identity_of(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::nullopt;
    throw errno_error("cannot stat", ErrorContext{.archive = path.string()});
  }
  auto ns = [](const timespec& t) {
    return static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
  };
  return FileIdentity{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
                      static_cast<std::uint64_t>(st.st_size), ns(st.st_mtim), ns(st.st_ctim)};
}

}  // namespace modelzip::io
