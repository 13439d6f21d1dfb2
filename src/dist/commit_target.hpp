// CommitTarget: the root rank's side of a collective commit that touches
// the archive's structure: the lock, recovery of an interrupted append, the
// file the ranks write into and where their entries start, and the final
// step that makes the new entries the archive (the commit point).
//
// This is the single place that depends on the append path's contract
// (FORMAT.md §8.1, zip::AppendSession): the ranks' entries overwrite an
// existing archive's tail (tags.txt, central directory, end records), which
// the append journal saves; a missing archive is written to a temporary
// file beside the target that is renamed over it at the end.
//
// Not thread-safe. The lock is held from construction to destruction.
// Errors: Error(io) naming the archive.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dist/rank_locks.hpp"
#include "modelzip/archive.hpp"
#include "zip/zip_directory.hpp"

namespace modelzip::dist {

class CommitTarget {
 public:
  // Locks `path` and brings it to a committed state (an interrupted append
  // is recovered first); opens the archive if there is one, and then lets
  // the ranks take their locks on it (dist/rank_locks.hpp).
  // `on_notice` (if set) hears "rolled back an interrupted save of tag X"
  // when an interrupted append was recovered (zip::rollback_notice).
  // `writers_timeout`: abort()'s wait for ranks still writing.
  CommitTarget(std::filesystem::path path, bool durable,
               const std::function<void(const std::string&)>& on_notice = {},
               std::chrono::milliseconds writers_timeout = kWritersTimeout);
  ~CommitTarget();
  CommitTarget(const CommitTarget&) = delete;
  CommitTarget& operator=(const CommitTarget&) = delete;

  const Archive* old() const noexcept { return old_ ? &*old_ : nullptr; }

  struct Start {
    std::string file;          // the path every rank opens for writing
    std::uint64_t offset = 0;  // where the new entries start
    // The append journal's nonce (existing archive; 0: a new archive's
    // temporary file): a rank writes only while that journal exists.
    std::uint64_t nonce = 0;
  };
  // Journals (existing archive) or creates the temporary file holding
  // modelzip.toml (new archive). Before the commit point, abort() undoes it.
  // `kept` (existing archive; null: all): the old entries the new directory
  // lists; the others but tags.txt become free entries after the commit
  // point (FORMAT.md "Removing in place").
  Start begin(const std::string& tag, const std::set<const zip::EntryInfo*>* kept = nullptr);

  // Existing archive: writes the relocated copy of the old tail beyond
  // `end` (zip::AppendSession::protect), where `end` bounds everything the
  // commit writes. Call it after begin() and before any rank writes.
  void protect(std::uint64_t end);

  // The commit: writes, after `end_of_data`, the central directory (the old
  // entries but tags.txt, then `written`, then a new tags.txt holding
  // `tags`) and the end records, fsyncing before and after the end record
  // when durable, then drops the journal or renames the temporary file.
  // `*visible` becomes true at the commit point; an error after it means
  // the new archive is there but may not be durable, or (with `kept`) that
  // the dropped entries' bytes are not yet formatted as free entries
  // (streaming readers may stop there; the next in-place commit retries).
  void finish(const std::vector<zip::EntryInfo>& written, const std::vector<std::string>& tags,
              std::uint64_t end_of_data, bool* visible);

  // Before the commit point: leaves the archive as it was (writes the old
  // tail back and drops the journal, or removes the temporary file; if
  // that fails, the journal stays for recovery). An existing archive is
  // restored only once no rank holds its writing lock (waiting up to
  // `writers_timeout`); after that the journal is left for the next
  // writer, which waits for them through the writer lock. Never throws.
  void abort() noexcept;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  std::optional<Archive> old_;
};

}  // namespace modelzip::dist
