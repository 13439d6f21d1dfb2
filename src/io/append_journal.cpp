#include "io/append_journal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>

#include "io/durable_file.hpp"
#include "io/syscalls.hpp"
#include "modelzip/error.hpp"

namespace modelzip::io {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kMagic = "modelzip-append v1 ";

fs::path folder_of(const fs::path& p) {
  return p.parent_path().empty() ? fs::path(".") : p.parent_path();
}

[[noreturn]] void fail(const fs::path& path, const std::string& what) {
  throw Error(ErrorCode::io, what + ": " + std::strerror(errno),
              ErrorContext{.archive = path.string()});
}

// fsyncs the archive's folder; errors name the archive.
void sync_folder(const fs::path& archive, const char* after) {
  try {
    sync_path(folder_of(archive), true);
  } catch (const Error& e) {
    throw Error(ErrorCode::io,
                std::string("cannot fsync the folder after ") + after + ": " + e.message() + " (" +
                    e.context().archive + ")",
                ErrorContext{.archive = archive.string()});
  }
}

}  // namespace

fs::path append_journal_path(const fs::path& archive) {
  return folder_of(archive) / ("." + archive.filename().string() + ".modelzip-append");
}

std::optional<std::uint64_t> read_append_journal(const fs::path& archive) noexcept {
  int fd = ::open(append_journal_path(archive).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[64];
  ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  std::string_view text(buf, static_cast<std::size_t>(n));
  if (!text.starts_with(kMagic) || !text.ends_with("\n")) return std::nullopt;
  text.remove_prefix(kMagic.size());
  text.remove_suffix(1);
  std::uint64_t size = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), size);
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return size;
}

void write_append_journal(const fs::path& archive, std::uint64_t old_size) {
  const fs::path path = append_journal_path(archive);
  std::string text = std::string(kMagic) + std::to_string(old_size) + "\n";
  int fd = sys::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, "cannot create the append journal");
  std::size_t done = 0;
  bool ok = true;
  while (ok && done < text.size()) {
    ssize_t n = sys::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = ENOSPC;
    ok = n > 0;
    if (ok) done += static_cast<std::size_t>(n);
  }
  ok = ok && sys::fsync(fd) == 0;
  int error = ok ? 0 : errno;
  if (sys::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) {
    // A partial journal reads as no journal; remove it all the same.
    sys::unlink(path.c_str());
    errno = error;
    fail(path, "cannot write the append journal");
  }
  try {
    sync_folder(archive, "writing the append journal");
  } catch (const Error&) {
    sys::unlink(path.c_str());
    throw;
  }
}

void remove_append_journal(const fs::path& archive, bool durable) {
  if (sys::unlink(append_journal_path(archive).c_str()) != 0 && errno != ENOENT)
    fail(append_journal_path(archive), "cannot remove the append journal");
  if (durable) sync_folder(archive, "removing the append journal");
}

}  // namespace modelzip::io
