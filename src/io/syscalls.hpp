// The system calls through which modelzip changes files: every write,
// fsync, rename, truncate, unlink and every open for writing made by the
// writers (io/durable_file, io/append_journal, zip/zip_stream_writer) goes
// through io::sys, so that tests can make any one of them fail or kill the
// process right before it (io::FaultInjector).
//
// The functions have the contracts of the POSIX calls of the same name
// (return value, errno). Without an installed injector they call the OS
// directly; the only overhead is one atomic load per call.
//
// Reads (io/mapped_file) and libzip's own file access (zip/zip_writer, used
// by the npz converter, not by checkpoint commits) do not go through here.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace modelzip::io {

enum class SysOp : std::uint8_t {
  open,        // open() for writing (O_WRONLY / O_RDWR)
  write,       // write(), pwrite(), AIO writes and copies into a mapping
  fsync_file,  // fsync() of a regular file
  fsync_dir,   // fsync() of a folder
  rename,
  truncate,  // ftruncate()
  unlink,
  close,
};
inline constexpr int kSysOpCount = 8;

const char* sys_op_name(SysOp op) noexcept;

// A file-changing call that succeeded, as recorded for tests that replay a
// commit against a model of the file system (power-loss trials).
struct SysCallRecord {
  SysOp op = SysOp::write;
  int fd = -1;               // the descriptor used; open: the one returned
  int flags = 0;             // open
  std::string path, to;      // open, unlink, rename (path -> to); fsync: the file or folder
  std::uint64_t offset = 0;  // write: where the bytes went; truncate: the new size
  std::string data;          // write: the bytes written
};

// Decides the fate of system calls, for tests. Install with
// FaultInjector::install(); the calls of every thread of the process then
// consult it. Counting is atomic, so calls from several threads are counted
// exactly once each; install() and uninstall() must not race with calls
// being made (install before the operation under test starts, uninstall
// after it returns).
//
// Calls are numbered from 1 in the order they are made, once over all kinds
// (total) and once per kind. A plan names one call, by kind or over all
// kinds, and what happens to it.
class FaultInjector {
 public:
  enum class Action : std::uint8_t {
    count,        // nothing: only count calls
    fail,         // the call fails with `error` without doing anything
    fail_after,   // this call and every later one of the kind fail with `error`
    short_write,  // a write writes half its bytes (at least 1 when possible)
    disk_full,    // a short write, then every later write fails with ENOSPC
    kill,         // SIGKILL the process right before the call
  };
  struct Plan {
    Action action = Action::count;
    bool any_kind = false;      // `nth` counts calls of every kind
    SysOp kind = SysOp::write;  // else calls of this kind
    std::uint64_t nth = 0;      // 1-based; 0 never matches
    int error = 5;              // EIO
    bool record_calls = false;  // keep a SysCallRecord of every successful call
  };

  FaultInjector() = default;
  explicit FaultInjector(Plan plan) : plan_(plan) {}
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;
  // Uninstalls itself if installed.
  ~FaultInjector();

  // Makes this the process's injector (replacing any other).
  void install() noexcept;
  void uninstall() noexcept;

  std::uint64_t total_calls() const noexcept { return total_.load(); }
  std::uint64_t calls(SysOp op) const noexcept { return by_kind_[static_cast<int>(op)].load(); }
  // Whether the planned fault happened.
  bool fired() const noexcept { return fired_.load(); }
  // The successful calls, in order (with Plan::record_calls).
  std::vector<SysCallRecord> records() const;

  // Used by io::sys: counts the call and returns the errno to fail it with
  // (0: perform it); for writes, may shrink `*size` (short write). May not
  // return (kill).
  int before(SysOp op, std::size_t* size) noexcept;
  bool recording() const noexcept { return plan_.record_calls; }
  // Used by io::sys after a successful call when recording.
  void record(SysCallRecord call);

 private:
  Plan plan_;
  std::atomic<std::uint64_t> total_{0};
  std::atomic<std::uint64_t> by_kind_[kSysOpCount] = {};
  std::atomic<bool> fired_{false};
  std::atomic<bool> failing_{false};  // fail_after / disk_full engaged
  mutable std::mutex records_mutex_;
  std::vector<SysCallRecord> records_;  // guarded by records_mutex_
};

namespace sys {

int open(const char* path, int flags, mode_t mode = 0);
ssize_t write(int fd, const void* data, std::size_t size);
ssize_t pwrite(int fd, const void* data, std::size_t size, off_t offset);
// An asynchronous positional write (Linux AIO, io_submit), which the
// caller makes itself: async_write_allowed is consulted before each
// submission as a write (counted; it may fail with errno set and false
// returned, shorten `*size`, or kill the process), async_write_done after
// each completed one (for a recording injector).
bool async_write_allowed(std::size_t* size);
void async_write_done(int fd, const void* data, std::size_t n, off_t offset);
// Copies `size` bytes from `data` to `to`, where a shared writable mapping
// of `fd` (pages present) holds its bytes from `offset`: a write like
// pwrite's for fault injection and records. Returns the bytes copied (fewer
// after an injected short write) or -1 with errno set.
ssize_t mapped_write(int fd, void* to, const void* data, std::size_t size, off_t offset);
int fsync(int fd);      // a regular file
int fsync_dir(int fd);  // a folder
int rename(const char* from, const char* to);
int ftruncate(int fd, off_t size);
int unlink(const char* path);
int close(int fd);

}  // namespace sys
}  // namespace modelzip::io
