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

#include <cstdint>
#include <filesystem>
#include <string>

namespace modelzip::io {

class TempFile {
 public:
  // Reserves a new, unique temporary path beside `target`. The file itself
  // is not created (the writer creates it).
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

// A new file opened for writing (created exclusively, mode 0644 less the
// umask). Closed by close() (which reports errors) or the destructor.
class OutputFile {
 public:
  explicit OutputFile(const std::filesystem::path& path);
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

// An exclusive advisory lock (flock) on the lock file
// ".<target name>.modelzip-lock" beside `target`, held for the object's
// lifetime. Blocks until acquired. Throws Error(io).
class FileLock {
 public:
  explicit FileLock(const std::filesystem::path& target);
  FileLock(FileLock&&) noexcept;
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock();

 private:
  int fd_ = -1;
};

}  // namespace modelzip::io
