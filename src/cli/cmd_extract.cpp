#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/open_archive.hpp"
#include "cli/terminal.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/error.hpp"

namespace modelzip::cli {
namespace {

// A directory descriptor that closes itself.
class Dir {
 public:
  explicit Dir(int fd) : fd_(fd) {}
  Dir(Dir&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Dir& operator=(Dir&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Dir() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

[[noreturn]] void fail(const std::string& entry, const std::string& what) {
  throw Error(ErrorCode::io, what + ": " + std::strerror(errno), ErrorContext{.entry = entry});
}

// Opens (creating if needed) the folder `name` inside `parent` without
// following symbolic links, so nothing can lead outside the target folder.
Dir subfolder(const Dir& parent, const std::string& name, const std::string& entry) {
  if (::mkdirat(parent.fd(), name.c_str(), 0755) != 0 && errno != EEXIST)
    fail(entry, "cannot create folder '" + name + "'");
  int fd = ::openat(parent.fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fail(entry, "cannot enter folder '" + name + "' (a symbolic link is refused)");
  return Dir(fd);
}

int run(const std::vector<std::string>& argv) {
  Args args(argv, {}, {"--force"});
  args.expect_positionals(2, 2);
  Archive archive = open_archive(args.at(0, "ARCHIVE"));
  const std::string& target = args.at(1, "DIR");
  ::mkdir(target.c_str(), 0755);
  Dir root(::open(target.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root.fd() < 0) fail("", "cannot open folder '" + target + "'");
  std::uint64_t files = 0, bytes = 0;
  for (const std::string& name : archive.entry_names()) {
    // Names were validated at open: relative, no "..", no backslash. The
    // walk below refuses symbolic links as well.
    Dir dir(::dup(root.fd()));
    std::size_t start = 0;
    for (std::size_t slash; (slash = name.find('/', start)) != std::string::npos; start = slash + 1)
      dir = subfolder(dir, name.substr(start, slash - start), name);
    if (start == name.size()) continue;  // a folder entry
    std::string file = name.substr(start);
    Bytes data = archive.entry(name, ReadMode::copy);  // CRC-checked
    int flags =
        O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (args.flag("--force") ? O_TRUNC : O_EXCL);
    int fd = ::openat(dir.fd(), file.c_str(), flags, 0644);
    if (fd < 0)
      fail(name, errno == EEXIST ? "file exists (use --force to overwrite)" : "cannot create file");
    std::size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::write(fd, data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        int saved = errno;
        ::close(fd);
        errno = saved;
        fail(name, "cannot write");
      }
      done += static_cast<std::size_t>(n);
    }
    if (::close(fd) != 0) fail(name, "cannot write");
    ++files;
    bytes += data.size();
  }
  std::cerr << "extracted " << files << " files (" << human_bytes(bytes) << ") into "
            << printable(target) << "\n";
  return 0;
}

}  // namespace

extern const Command kExtractCommand{
    "extract", "Extract every entry into a folder (never outside it)",
    "modelzip extract ARCHIVE DIR [--force]",
    "Entry names that could escape DIR are rejected when the archive is opened, and\n"
    "symbolic links inside DIR are never followed. Every CRC is checked. Existing\n"
    "files are kept unless --force is given.\n"
    "\nExample:\n  modelzip extract model.zip unpacked/\n",
    run};

}  // namespace modelzip::cli
