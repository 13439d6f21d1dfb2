// An append session: extends a zip archive in place by overwriting its
// mutable tail (FORMAT.md section 8.1), crash-safely behind the append
// journal (io/append_journal.hpp), with rollback on failure. The one
// implementation of the append path, meant to be reused by every writer
// that adds entries to an archive (Writer::commit; a collective commit in
// which several processes write entries at offsets they agree on).
//
// Contract:
//  - Preconditions of the constructor: the caller holds the archive's writer
//    lock for the whole session (io::FileLock: no other writer touches the
//    file or the journal), has run recover_append() under that lock, and
//    passes the archive's current bytes and parsed directory, for which
//    zip::appendable_in_place(directory, file, tail_entry) holds.
//  - The constructor saves the old tail [start_offset(), old size) in the
//    journal (durably when `durable`), with the names of the tags being
//    saved, and opens the file for writing. From then on modelzip's readers
//    see the old archive (from the journal) until commit() removes the
//    journal.
//  - protect(end) must come next, before anything is written: it writes a
//    copy of the old tail, re-pointed, at a 4 KiB boundary at or beyond both
//    the old end and `end` (which the caller guarantees the new entries and
//    the new tail stay below), so that the file stays an ordinary zip of
//    the old archive (for every zip reader: the end records at its end lead
//    to that copy) while new entries overwrite the old tail; commit() cuts
//    the copy off when it sets the new size (FORMAT.md section 8.1). Without
//    protect() only modelzip's readers (through the journal) see the old
//    archive meanwhile. (The environment variable
//    MODELZIP_BENCHMARK_NO_TAIL_COPY=1 makes protect() write nothing: for
//    the benchmarks that measure the copy's cost, docs/crash-safety.md.)
//  - New entries are written from start_offset() on: through writer() (a
//    StreamZipWriter positioned there, which already lists every old entry
//    except `tail_entry` that Options::keep_entry keeps), or by anyone
//    writing to the file directly (e.g. other processes, each at its own
//    offset >= start_offset()); such
//    entries are then listed with writer().keep() and writer().skip_to()
//    moves past them. New entries must not overlap and must leave no gap
//    (every byte from start_offset() on belongs to an entry, FORMAT.md
//    section 1); the old entries keep_entry drops leave gaps before it,
//    which the caller marks as free entries after commit().
//  - commit(contents) writes `tail_entry` (stored) as the last entry, the
//    central directory and the end records, fsyncs (when durable; also
//    before the end records), gives the file a modification time other
//    than its old one if its size did not change (readers compare
//    identities), and removes the journal (then fsyncs the
//    folder when durable). The removal is the commit point: if commit()
//    throws and committed() is false, the session rolls back; if
//    committed() is true, the new archive is in place but may not survive a
//    power loss (only the folder fsync failed).
//  - rollback() (also run by the destructor of an uncommitted session,
//    which swallows its errors) writes the old tail back, cuts the file to
//    its old size, fsyncs when durable, gives the file a modification time
//    different from the one it had when the session began (readers use it
//    to see that the tail changed, zip/archive_snapshot.hpp), and removes
//    the journal: the file is the old archive byte for byte. If that fails,
//    the journal stays and readers and the next writer's recover_append()
//    restore the old archive from it.
//  - Cancellation: StreamZipWriter's progress reports (per 4 MiB written)
//    throw Error(cancelled) when the progress callback says stop or a
//    cancellation was requested (modelzip/cancel.hpp); the caller lets the
//    exception unwind through the session, which rolls back.
//
// Not thread-safe (one session, one thread). Errors: Error(io) naming the
// archive; Error(cancelled).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "modelzip/bytes.hpp"
#include "modelzip/progress.hpp"
#include "zip/zip_directory.hpp"
#include "zip/zip_stream_writer.hpp"

namespace modelzip::zip {

class AppendSession {
 public:
  struct Options {
    bool durable = true;
    std::uint64_t expected_bytes = 0;  // of new entry data, for progress
    ProgressCallback progress;
    // The writer writes large entries' data directly
    // (StreamZipWriter::write_large_data_directly).
    bool direct_data = false;
    // Which old entries the new central directory lists (all when empty;
    // never `tail_entry`). Entries it drops keep their bytes: they become
    // freed ranges (zip/free_range.hpp) once the session commits.
    std::function<bool(const EntryInfo&)> keep_entry;
    // The tags being saved, for the journal (so that the writer that rolls
    // an interrupted save back can name them).
    std::vector<std::string> tags;
  };
  AppendSession(std::filesystem::path path, const Directory& directory, const Bytes& file,
                std::string tail_entry, Options options);
  ~AppendSession();
  AppendSession(const AppendSession&) = delete;
  AppendSession& operator=(const AppendSession&) = delete;

  // Where new entries begin: the old tail's first byte.
  std::uint64_t start_offset() const noexcept { return tail_start_; }
  // The size of the archive before the session.
  std::uint64_t old_size() const noexcept { return old_size_; }
  StreamZipWriter& writer() { return *writer_; }
  // Writes the relocated copy of the old tail (see above). Error(io).
  void protect(std::uint64_t end);
  int fd() const noexcept { return fd_; }

  // Writes the tail entry, directory and end records; removes the journal.
  // Returns the new file size.
  std::uint64_t commit(const std::vector<Bytes>& tail_contents);
  bool committed() const noexcept { return committed_; }
  void rollback();
  // Gives up without touching the file: the journal stays, and readers and
  // the next writer's recover_append() restore the old archive from it.
  // For when the file may still be written by others (a collective commit
  // whose ranks have not all stopped writing). Never throws.
  void abandon() noexcept;
  // The journal's nonce (FORMAT.md section 8.2): names this session's
  // journal among later ones at the same path.
  std::uint64_t nonce() const noexcept { return nonce_; }

 private:
  void close_file() noexcept;

  std::filesystem::path path_;
  std::string tail_entry_;
  Options options_;
  std::uint64_t tail_start_ = 0, old_size_ = 0, nonce_ = 0;
  Bytes old_tail_;
  EntryInfo tail_info_;  // the old tail entry (tags.txt) as the directory lists it
  std::int64_t old_mtime_ns_ = 0;
  int fd_ = -1;
  bool journaled_ = false;
  bool committed_ = false;
  std::unique_ptr<StreamZipWriter> writer_;
};

// Restores the archive at `path` from an append journal left by an
// interrupted session (valid journal: the old tail is written back and the
// file cut to its old size; torn journal: the archive was not touched yet),
// then removes the journal. Nothing to do without a journal. The caller
// holds the writer lock. Returns, when a save was rolled back, the tags it
// was adding (empty when its journal, of an older modelzip, does not name
// them); nullopt when nothing was rolled back (also when the archive no
// longer exists: its journal is removed, having nothing to restore). Throws Error(io) (the
// journal then stays) or Error(corrupt) when the journal cannot belong to
// the file (it is shorter than the journal's tail start).
std::optional<std::vector<std::string>> recover_append(const std::filesystem::path& path,
                                                       bool durable);

// "rolled back an interrupted save of tag X" (tags: "of tags X and Y"; none
// known: "rolled back an interrupted save"), what a writer reports after
// recover_append rolled a save back.
std::string rollback_notice(const std::vector<std::string>& tags);

}  // namespace modelzip::zip
