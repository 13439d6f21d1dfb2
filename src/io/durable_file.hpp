// Durable replacement of a file: write a complete new version beside the
// target, fsync it, rename it over the target, fsync the folder. Readers see
// the old file or the new one, never a mix, and after a crash at any point the
// old file is intact (at worst a temporary file is left, which
// remove_stale_temp_files deletes later).
//
// Temporary files are named ".<target name>.mztmp-<pid>-<random>" (plus any
// suffix libzip appends) so that stale ones can be attributed to their
// (dead) writer process.
//
// All file changes go through io::sys (io/syscalls.hpp). Thread safety: the
// classes here are not thread-safe (one object per thread); distinct objects
// may be used from different threads. Each FileLock opens its own descriptor,
// so FileLocks exclude each other across processes and across threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace modelzip::io {

class TempFile {
 public:
  // Reserves a new, unique temporary path beside `target`. The file itself
  // is not created (the writer creates it). A symbolic link stays a link:
  // the file it leads to (resolve_archive_path) is the one replaced. An
  // existing folder, device, pipe or socket is never replaced: Error(io,
  // "is a folder, not a file" / "is not a regular file ...") naming `target`.
  static TempFile beside(const std::filesystem::path& target);
  TempFile(TempFile&&) noexcept;
  TempFile& operator=(TempFile&&) = delete;
  // Removes the temporary file unless commit() succeeded.
  ~TempFile();

  const std::filesystem::path& path() const noexcept { return path_; }
  const std::filesystem::path& target() const noexcept { return target_; }

  // fsyncs the temporary file (if durable), renames it over the target, and
  // fsyncs the folder (if durable). Throws Error(io) naming the target. If
  // committed() is false afterwards the target is unchanged (and the
  // temporary file is removed by the destructor); if it is true the rename
  // happened and only the folder fsync failed: the target is the new
  // version, which may not survive a power loss.
  void commit(bool durable);
  bool committed() const noexcept { return committed_; }

 private:
  TempFile(std::filesystem::path target, std::filesystem::path path);
  std::filesystem::path target_;
  std::filesystem::path path_;
  bool committed_ = false;
};

// Error(io) for a failure (errno says which) to create the new version of
// `target`: names the file and the folder the user gave, never the
// temporary file beside it, e.g. "cannot create model.zip in ./:
// permission denied" (archive context: `target`).
[[noreturn]] void fail_to_create(const std::filesystem::path& target);

// A new file opened for writing (created exclusively, mode 0644 less the
// umask). Closed by close() (which reports errors) or the destructor.
class OutputFile {
 public:
  explicit OutputFile(const std::filesystem::path& path);
  // Creates `temp`'s file; errors name its target (fail_to_create).
  explicit OutputFile(const TempFile& temp);
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();
  int fd() const noexcept { return fd_; }
  // Closes the file; throws Error(io) if the kernel reports a write error.
  void close();

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

// An existing file opened for writing in place (the append path).
class AppendFile {
 public:
  explicit AppendFile(const std::filesystem::path& path);
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  ~AppendFile();
  int fd() const noexcept { return fd_; }
  void sync();  // fsync; throws Error(io)
  // Cuts the file to `size` and fsyncs it; false if either failed.
  bool truncate(std::uint64_t size) noexcept;
  void close();  // throws Error(io)

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

// fsyncs a file or folder by path. Throws Error(io).
void sync_path(const std::filesystem::path& path, bool directory);

// Deletes temporary files beside `target` left by writer processes that no
// longer run. Never throws.
void remove_stale_temp_files(const std::filesystem::path& target) noexcept;

// The archive path to write to: `path` with symbolic links in its last
// component followed (up to 40), so that the lock, the temporary file and
// the rename happen beside the real file and a link stays a link. A
// dangling link yields its (missing) target, where a first save creates the
// archive. Throws Error(io) naming `path` for a link loop or an unreadable
// link.
std::filesystem::path resolve_archive_path(const std::filesystem::path& path);

// Serializes the writers of one archive without creating any file: held
// for the object's lifetime, blocks until acquired. Each lock is tried
// without blocking first; only if another writer holds it, `on_wait` (if
// set) is called, at most once per FileLock and before blocking, from the
// constructing thread (so a command can say whom it waits for; it must not
// throw). Throws Error(io) naming `target`.
//  - If the archive exists: an exclusive lock (an open-file-description
//    lock of the whole file, fcntl F_OFD_SETLKW) on the archive itself,
//    through a descriptor opened read-write (so a writer refuses, before
//    doing anything, an archive it may not modify: the kernel's rule for
//    open(O_RDWR), under which root may modify a read-only archive). After
//    locking, `target` must still name the locked file: a rewrite renames a
//    new file over the archive, so a writer that waited on the old one
//    locks the new one instead.
//  - If it does not exist (first save): an exclusive flock on the folder,
//    after which the archive must still be missing (else: as above). Only
//    first saves take it, for as long as their commit lasts.
// `target` must come from resolve_archive_path (a symbolic link there is
// refused rather than locked under its own name). Both locks belong to the
// open file description: FileLocks exclude each other across processes and
// across threads, opening and closing the archive elsewhere in the process
// does not release them, and they die with their process.
// While it waits, a signal that interrupts the wait (EINTR) ends it with
// Error(cancelled) when a cancellation was requested (modelzip/cancel.hpp)
// or `keep_waiting` (if given) returns false; else the wait goes on. With
// `poll` > 0 (and `keep_waiting` given) the wait does not block: it asks
// both that often between attempts, so that a stop set by another thread
// ends it too.
class FileLock {
 public:
  explicit FileLock(const std::filesystem::path& target, const std::function<void()>& on_wait = {},
                    const std::function<bool()>& keep_waiting = {},
                    std::chrono::milliseconds poll = std::chrono::milliseconds(0));
  FileLock(FileLock&&) noexcept;
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock();

  // The locked archive, opened read-write; -1 when there was no archive.
  int archive_fd() const noexcept { return archive_ ? fd_ : -1; }

 private:
  int fd_ = -1;
  bool archive_ = false;
};

// Gives the new version `to` of an archive the permission bits, owner and
// group of the current one `from` (both descriptors), so that a rewrite
// keeps what it found. The owner and group are changed only where they
// differ; if the kernel does not allow it (an unprivileged user may not
// give a file away), Error(io) naming `target`, and the caller leaves the
// archive unchanged.
void keep_attributes(int from, int to, const std::filesystem::path& target);

}  // namespace modelzip::io
