#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <vector>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/interrupt.hpp"
#include "cli/open_archive.hpp"
#include "cli/terminal.hpp"
#include "io/posix_file.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/cancel.hpp"
#include "modelzip/entry_stream.hpp"
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
    fail(entry, "cannot create folder " + quoted_name(name));
  int fd = ::openat(parent.fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    fail(entry, "cannot enter folder " + quoted_name(name) + " (a symbolic link is refused)");
  return Dir(fd);
}

// The piece size of extract's reads and writes: the memory an entry of any
// size or compression takes, and how soon an interrupt is noticed.
constexpr std::size_t kPiece = std::size_t{4} << 20;

// Writes entry `name` of `archive` into the new file `file` of `dir` (with
// `force`, over an existing one) and returns its size. One path for every
// entry: an EntryStream, read and written in pieces of kPiece bytes, whether
// stored or deflated. The CRC-32 and size are checked by the read of the last
// piece; whatever fails (damaged data found there, invalid deflate data, a
// write error, an interrupt: Error(cancelled)) removes the file before the
// error is thrown, so no partial file is left behind.
std::uint64_t write_entry(const Archive& archive, const std::string& name, const Dir& dir,
                          const std::string& file, bool force) {
  const int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (force ? O_TRUNC : O_EXCL);
  io::UniqueFd fd(::openat(dir.fd(), file.c_str(), flags, 0644));
  if (!fd.valid())
    fail(name, errno == EEXIST ? "file exists (use --force to overwrite)" : "cannot create file");
  try {
    EntryStream stream = EntryStream::open(archive, name);
    std::vector<std::byte> piece(static_cast<std::size_t>(
        std::min<std::uint64_t>(kPiece, std::max<std::uint64_t>(stream.size(), 1))));
    std::uint64_t done = 0;
    for (;;) {
      if (cancel_requested()) throw Error(ErrorCode::cancelled, "interrupted");
      const std::size_t n = stream.read(piece);
      if (n == 0) break;
      io::pwrite_full(fd.get(), piece.data(), n, done, ErrorContext{.entry = name});
      done += n;
    }
    if (::close(fd.release()) != 0) fail(name, "cannot write");
    return done;
  } catch (...) {
    fd = io::UniqueFd();  // closed before the unlink
    ::unlinkat(dir.fd(), file.c_str(), 0);
    throw;
  }
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
  Archive archive = open_archive(args.path_at(0, "ARCHIVE"));
  const std::string& target = args.path_at(1, "DIR");
  if (::mkdir(target.c_str(), 0755) != 0 && errno != EEXIST)
    fail("", "cannot create folder " + quoted_name(target));
  Dir root(::open(target.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root.fd() < 0 && errno == ENOTDIR)
    throw Error(ErrorCode::invalid_argument,
                "DIR " + quoted_name(target) + " is a file, not a folder");
  if (root.fd() < 0) fail("", "cannot open folder " + quoted_name(target));
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
    const std::string file = name.substr(start);
    try {
      bytes += write_entry(archive, name, dir, file, args.flag("--force"));
    } catch (const Error& e) {
      if (e.code() == ErrorCode::cancelled)  // in the read or between pieces
        stop_interrupted(name, "; its partly written file was removed");
      throw;
    }
    ++files;
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
    "symbolic links inside DIR are never followed. Every entry, stored or deflated,\n"
    "is streamed in pieces of 4 MiB and its CRC checked at its end; a damaged entry\n"
    "fails, naming it, and leaves no file. Existing files are kept unless --force\n"
    "is given. Interrupted (Ctrl-C, SIGTERM: exit 130, 143), it keeps the files it\n"
    "finished and removes the one it was writing.\n"
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
