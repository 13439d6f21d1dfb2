// Rank locks: how the ranks of a collective commit tell the root that their
// writes into the archive are in flight, and tell each other that they are
// alive (FORMAT.md §8.4). Both are shared open-file-description locks
// (fcntl F_OFD_SETLK, F_RDLCK) of one byte each, far beyond any data of the
// file: rank r holds [kWritingLocks + r] while it writes and
// [kAliveLocks + r] from the start of the write phase to the end of its
// commit. The kernel releases them when the process ends, however it ends
// (kill -9 included), and only then: a dead rank's writes can no longer
// land once its locks are gone (its asynchronous writes in flight finish
// before the process's descriptors are closed).
//
// The root holds the writer lock (an exclusive lock of the whole file,
// io::FileLock) and opens the rank lock range [kWritingLocks, kRankLocksEnd)
// of it (allow_rank_locks) before the ranks write. Before it undoes a
// commit (rollback: the old tail written back, the file cut to its old
// size) it takes [kWritingLocks, kAliveLocks) exclusively (wait_for_writers),
// so no rank still writes into bytes the rollback restores or cuts off; a
// rank that finds that range taken does not start writing. Other writers of
// the archive ask for the whole file, so they wait for both the root and
// every rank still writing.
//
// Thread safety: one RankLocks per rank and commit; the functions keep no
// state. Errors: Error(io) naming the file.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "io/posix_file.hpp"

namespace modelzip::dist {

inline constexpr std::uint64_t kWritingLocks = std::uint64_t{1} << 62;
inline constexpr std::uint64_t kAliveLocks = kWritingLocks + (std::uint64_t{1} << 32);
inline constexpr std::uint64_t kRankLocksEnd = kAliveLocks + (std::uint64_t{1} << 32);

// One rank's locks on the file the ranks write (the archive, or the
// temporary file of a new archive). Construction takes the alive lock;
// destruction releases everything.
class RankLocks {
 public:
  // Opens `file` (read-only: the locks need no more) and takes this rank's
  // alive lock. Error(io) naming `file` if either fails.
  RankLocks(const std::filesystem::path& file, int rank);

  // Where the ranks share no file (an s3:// upload): the alive locks on a
  // file of this host's temporary folder named after `key` (the same on
  // every rank: the URL and the upload id), created if missing; this rank
  // marks its byte `rank` in it after taking its lock, and lost() names only
  // ranks that marked it (ranks of this host: others are never named).
  // `remove`: the file is removed with this object (the root's). Never
  // throws: where the file cannot be used (permissions, no temporary
  // folder), lost() names no rank.
  struct OnThisHost {
    std::string key;
    bool remove = false;
  };
  RankLocks(const OnThisHost& where, int rank);
  ~RankLocks();
  RankLocks(RankLocks&&) noexcept = default;
  RankLocks& operator=(RankLocks&&) noexcept = default;

  // Takes this rank's writing lock without waiting. Error(io) when the root
  // holds the range already (it is undoing the commit: nothing may be
  // written any more).
  void begin_writes();
  // Releases the writing lock (after the writes are complete).
  void end_writes() noexcept;

  // The ranks of 0..size-1 other than this one whose alive lock nobody
  // holds: processes that ended (or never reached the write phase).
  std::vector<int> lost(int size) const;

 private:
  std::filesystem::path file_;
  int rank_;
  io::UniqueFd fd_;
  bool marked_ = false;  // OnThisHost: lost() counts only marked ranks
  bool remove_ = false;
};

// Root: releases [kWritingLocks, kRankLocksEnd) of the writer lock held on
// `lock_fd` (the rest of the file stays locked), so ranks can take theirs.
void allow_rank_locks(int lock_fd, const std::filesystem::path& file);

// Root: takes [kWritingLocks, kAliveLocks) exclusively on `fd` (opened
// read-write), retrying until no rank holds a writing lock or `timeout`
// passes. True when taken; false on time-out or error (a rank still writes:
// the caller must not undo the commit, the journal stays for recovery).
bool wait_for_writers(int fd, std::chrono::milliseconds timeout) noexcept;

// How long the root waits for ranks still writing before it undoes a
// commit (then it leaves the journal to the next writer, which waits for
// them through the writer lock), unless configured otherwise.
inline constexpr std::chrono::seconds kWritersTimeout{60};

// The root's wait for writing ranks (CollectiveOptions::rank_lock_timeout):
// `option` when set, else the environment variable
// MODELZIP_RANK_LOCK_TIMEOUT (seconds, decimal, >= 0), else kWritersTimeout.
// Error(invalid_argument) for a negative option or a malformed variable.
std::chrono::milliseconds writers_timeout(std::optional<std::chrono::milliseconds> option);

// "rank 1" / "ranks 1 and 3" / "ranks 1, 2 and 3".
std::string ranks_text(const std::vector<int>& ranks);

}  // namespace modelzip::dist
