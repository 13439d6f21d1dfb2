// The append journal: crash safety for archives that are extended in place.
//
// An append overwrites the archive's mutable *tail* (the bytes from
// `tail_start` to the end of the file: tags.txt, the central directory and
// the end records, FORMAT.md section 8.1). Before the first byte of the tail
// changes, the writer saves the old tail in ".<archive name>.modelzip-append"
// beside the archive (written, fsynced, and its folder fsynced when
// durable). The bytes before `tail_start` never change during an append, so
// while the journal exists the previous archive is exactly
//     archive[0, tail_start) + journal tail
// and that is what readers use. Removing the journal commits the append.
//
// Byte layout (little-endian), FORMAT.md section 8.2:
//   0    19  "modelzip-append v3\n"
//   19   8   u64 nonce: random, new for every append (readers use it to tell
//            one journal from a later one at the same path)
//   27   8   u64 tail_start
//   35   8   u64 old_size (>= tail_start): the size of the previous archive
//   43   8   u64 N: length of the tag list
//   51   N   the tags being saved, UTF-8, each followed by "\n"
//   51+N L   the previous archive's bytes [tail_start, old_size), L = old_size - tail_start
//   51+N+L 4 u32 CRC-32 of everything before it
// The file is exactly 55 + N + L bytes. Anything else (short, long, bad CRC,
// unknown magic) is a *torn* journal: one whose writing was interrupted,
// which means the archive itself was not touched yet.
// Version 2 (modelzip before the tag list) is the same without N and the
// tags (header 43 bytes); the version 1 journal "modelzip-append v1 <old
// size>\n" of modelzip 0.1.0 (appends wrote after the old end) reads as
// tail_start = old_size with an empty tail and nonce 0. Both read with no
// tags.
//
// Thread safety: free functions; concurrent writers must serialize on the
// archive's writer lock (only the lock holder writes or removes a journal).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/file_identity.hpp"
#include "modelzip/bytes.hpp"

namespace modelzip::io {

struct AppendJournal {
  std::uint64_t nonce = 0;
  std::uint64_t tail_start = 0;
  std::uint64_t old_size = 0;
  Bytes tail;  // old_size - tail_start bytes
  // The tags the interrupted save was adding (for the notice of the writer
  // that rolls it back); names without "\n".
  std::vector<std::string> tags;
};

struct JournalState {
  enum class Kind { absent, torn, valid } kind = Kind::absent;
  AppendJournal journal;                 // valid only
  std::optional<FileIdentity> identity;  // of the journal file (torn and valid)
  // Same state for the reader protocol: both absent, the same valid journal
  // (nonce), or the same torn file (identity).
  bool same_as(const JournalState& other) const noexcept;
};

std::filesystem::path append_journal_path(const std::filesystem::path& archive);

// Parses the bytes of a journal file (untrusted: any bytes): the journal
// of a complete version 1, 2 or 3 file, nullopt for a torn one (anything
// else). Never throws (but std::bad_alloc); reads only inside `bytes`.
std::optional<AppendJournal> parse_append_journal(std::span<const std::byte> bytes);

// The bytes of the version 3 journal file for `journal` (the layout
// above). Error(invalid_argument) when the tail's size is not old_size -
// tail_start or a tag holds "\n".
std::vector<std::byte> encode_append_journal(const AppendJournal& journal);

// Reads the journal beside `archive`. Throws Error(io) only when a journal
// exists but cannot be read (e.g. permissions).
JournalState read_append_journal(const std::filesystem::path& archive);

// A new random nonce for write_append_journal.
std::uint64_t new_journal_nonce();

// Creates the journal (exclusively: an existing one is Error(io)); with
// `durable`, fsyncs it and its folder before returning. On failure removes
// what it created and throws Error(io) naming the journal.
void write_append_journal(const std::filesystem::path& archive, const AppendJournal& journal,
                          bool durable);

// Removes the journal (fine if absent). Throws Error(io). With `durable`,
// then fsyncs the folder (Error(io) "cannot fsync the folder after removing
// the append journal"): `*removed`, if given, tells whether the unlink
// itself happened when that fsync throws.
void remove_append_journal(const std::filesystem::path& archive, bool durable,
                           bool* removed = nullptr);

}  // namespace modelzip::io
