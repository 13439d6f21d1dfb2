#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/interrupt.hpp"
#include "cli/open_archive.hpp"
#include "cli/terminal.hpp"
#include "io/posix_file.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/cancel.hpp"
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
  throw io::errno_error(what, ErrorContext{.entry = entry});
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

// The entries to extract: all, or with --tag the root files, the tags'
// folders and the blobs of other tags they share.
std::vector<std::string> selected_entries(const Archive& archive,
                                          const std::vector<std::string>& tags) {
  if (tags.empty()) return archive.entry_names();
  std::set<std::string> folders, shared;
  for (const auto& t : tags) {
    const std::string tag = archive.find_tag(t).value_or(t);
    for (const auto& p : archive.params(tag)) shared.insert(p.blob);  // throws for a bad tag
    for (const auto& p : archive.updater_states(tag)) shared.insert(p.blob);
    folders.insert(tag + "/");
  }
  std::vector<std::string> out;
  for (const auto& name : archive.entry_names()) {
    auto slash = name.find('/');
    if (slash == std::string::npos || folders.count(name.substr(0, slash + 1)) ||
        shared.count(name))
      out.push_back(name);
  }
  return out;
}

int run(const std::vector<std::string>& argv) {
  Args args(argv, {"--tag"}, {"--force"});
  args.expect_positionals(2, 2, {"ARCHIVE", "DIR"});
  // SIGINT and SIGTERM stop at the next piece (exit 130, 143): the files
  // written so far stay, the one being written is removed rather than left
  // cut short.
  install_interrupt_handlers();
  Archive archive = open_archive(args.at(0, "ARCHIVE"));
  const std::string& target = args.at(1, "DIR");
  if (::mkdir(target.c_str(), 0755) != 0 && errno != EEXIST)
    fail("", "cannot create folder '" + target + "'");
  Dir root(::open(target.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root.fd() < 0) fail("", "cannot open folder '" + target + "'");
  std::uint64_t files = 0, bytes = 0;
  const std::vector<std::string> entries = selected_entries(archive, args.values("--tag"));
  if (!args.flag("--force")) {  // refuse before writing anything, naming the output path
    std::string first;
    std::size_t existing = 0;
    for (const std::string& name : entries) {
      struct stat st;
      const std::string out = (std::filesystem::path(target) / name).string();
      if (!name.ends_with("/") && ::lstat(out.c_str(), &st) == 0 && existing++ == 0) first = out;
    }
    if (existing)
      throw Error(ErrorCode::already_exists,
                  "exists already" +
                      (existing > 1 ? " (and " + std::to_string(existing - 1) + " more file(s))"
                                    : std::string()) +
                      "; nothing was extracted (use --force to overwrite)",
                  ErrorContext{.archive = first});
  }
  // Throws Error(cancelled) for an interrupt at entry `name`, saying what stays.
  const auto stop_interrupted = [&](const std::string& name, const std::string& what_of_it) {
    throw Error(ErrorCode::cancelled,
                "extract cancelled (interrupted) after " + std::to_string(files) +
                    " file(s), which stay in " + target + what_of_it,
                ErrorContext{.archive = archive.name(), .entry = name});
  };
  for (const std::string& name : entries) {
    if (cancel_requested()) stop_interrupted(name, "");
    // Names were validated at open: relative, no "..", no backslash. The
    // walk below refuses symbolic links as well.
    Dir dir(::dup(root.fd()));
    std::size_t start = 0;
    for (std::size_t slash; (slash = name.find('/', start)) != std::string::npos; start = slash + 1)
      dir = subfolder(dir, name.substr(start, slash - start), name);
    if (start == name.size()) continue;  // a folder entry
    std::string file = name.substr(start);
    Bytes data;
    try {
      // The whole entry, CRC-checked: a stored one is a view of the mapped
      // archive (file pages, no copy: any size in bounded memory), a
      // deflated one is decompressed whole.
      data = archive.entry_part(name, 0, archive.entry_size(name));
    } catch (const Error& e) {
      if (e.code() == ErrorCode::cancelled) stop_interrupted(name, "");  // in the read
      throw;
    }
    int flags =
        O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (args.flag("--force") ? O_TRUNC : O_EXCL);
    int fd = ::openat(dir.fd(), file.c_str(), flags, 0644);
    if (fd < 0)
      fail(name, errno == EEXIST ? "file exists (use --force to overwrite)" : "cannot create file");
    // Pieces of at most 8 MiB, so that an interrupt is noticed soon.
    constexpr std::size_t kPiece = std::size_t{8} << 20;
    std::size_t done = 0;
    while (done < data.size()) {
      if (cancel_requested()) {
        ::close(fd);
        ::unlinkat(dir.fd(), file.c_str(), 0);
        stop_interrupted(name, "; its partly written file was removed");
      }
      ssize_t n = ::write(fd, data.data() + done, std::min(kPiece, data.size() - done));
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
    "extract",
    "Extract every entry into a folder (never outside it)",
    "modelzip extract ARCHIVE DIR [--tag T]... [--force]",
    "Entry names that could escape DIR are rejected when the archive is opened, and\n"
    "symbolic links inside DIR are never followed. Every CRC is checked. Existing\n"
    "files are kept unless --force is given. Interrupted (Ctrl-C, SIGTERM: exit\n"
    "130, 143), it keeps the files it finished and removes the one it was writing.\n"
    "Options:\n"
    "  --tag T    only the root files, tag T's folder and the blobs of other tags it\n"
    "             shares (repeatable); salvages the intact tags of a damaged archive\n"
    "  --force    overwrite existing files\n"
    "\nExamples:\n  modelzip extract model.zip unpacked/\n"
    "  modelzip extract model.zip step-2/ --tag step-2\n",
    run,
    1,
    false,
    true};

}  // namespace modelzip::cli
