// Opening an archive that a writer may be appending to: the reader protocol
// of FORMAT.md section 8.3.
//
// An append overwrites the archive's tail in place (zip/archive_layout.hpp)
// behind an append journal (io/append_journal.hpp). read_snapshot gives
// the bytes of one committed archive, never a mix of an old and a new tail:
//  - with a valid journal: the file's first tail_start bytes plus the
//    journal's copy of the old tail, accepted if the same journal (nonce)
//    is still there after the file was opened (so the file was that
//    journal's archive);
//  - otherwise (no journal, or a torn one, which means the tail was not
//    touched yet): the file, parsed to find its tail, the tail copied, and
//    accepted if the journal state and the file's identity (device, inode,
//    size, modification and change times) are the same before and after.
//    Every append that finishes grows the file, and a rolled-back one sets
//    a new modification time (AppendSession), so a tail written meanwhile
//    always shows.
// For a path that is a symbolic link, the journal is looked for beside the
// link and beside its target.
//
// The result is one contiguous read-only region: the untouched prefix
// mapped from the file (zero-copy, stays valid whatever later appends do),
// the tail a private copy. Its prefix is the file's, though, and after an
// in-place removal commits, its writer overwrites the first bytes of each
// freed range (free entries, FORMAT.md 8.5), so what a caller parses of the
// snapshot counts only if the snapshot is still current afterwards:
// read_snapshot hands the snapshot to the caller's `use` and checks that
// after it returns.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>

#include "io/append_journal.hpp"
#include "io/file_identity.hpp"
#include "io/posix_file.hpp"
#include "modelzip/bytes.hpp"
#include "modelzip/limits.hpp"
#include "zip/zip_directory.hpp"

namespace modelzip::zip {

// The file a snapshot came from: its descriptor and the length of the
// snapshot's stable prefix, its first bytes, which are that file's bytes at
// the same offsets for as long as the file exists (an append only
// overwrites from its tail on, a rewrite replaces the file), so they can be
// mapped from the file again later (Archive's private views). `identity`
// is the identity the file had throughout the read when the snapshot is
// the file itself (no valid journal before and after, identity unchanged);
// nullopt when the snapshot is the previous archive of a valid journal,
// whose removal (the commit of the append) leaves the file's identity as it
// was.
struct SnapshotFile {
  std::shared_ptr<const io::UniqueFd> fd;
  std::uint64_t stable_prefix = 0;
  std::optional<io::FileIdentity> identity;
  io::JournalState journal;  // as the read found it (kind absent: none)
};

// What one attempt of the reader protocol accepted.
struct Snapshot {
  Bytes bytes;
  // The parsed directory of `bytes` if the protocol parsed it anyway (no
  // valid journal), else empty and the caller parses.
  std::optional<Directory> directory;
  SnapshotFile file;
};

// How many attempts read_snapshot makes, in all, before it gives up.
inline constexpr int kSnapshotAttempts = 50;

// Reads a committed state of the archive at `path` (`tail_entry`: the entry
// an append rewrites, FORMAT.md 8.3) and passes it to `use`, which parses
// what it needs of it and keeps what it wants (it may move from the
// snapshot). One attempt is the reader protocol, `use`, and the check that
// the snapshot is still current (snapshot_current); an attempt that finds
// the archive changed, in the protocol or in that check, is discarded
// (also an Error `use` threw) and read_snapshot tries again after a short
// sleep, kSnapshotAttempts attempts in all. So `use` may be called more
// than once: what its last call kept is the result.
//
// Errors: Error(io) naming the path (cannot open or map; the archive
// changed during every attempt: the message says how often its append
// journal and how often the file changed), Error(corrupt) from the
// directory parse of a file that is stable and does not parse or from a
// journal that does not fit the file, and the Error of `use` for a
// snapshot that is still current. Thread-safe if `use` is.
void read_snapshot(const std::filesystem::path& path, std::string_view tail_entry,
                   const Limits& limits, const std::function<void(Snapshot&)>& use);

// Whether the snapshot `file` describes (read_snapshot of `path`) is still
// the archive's committed state: the same journal is still there, or, for
// a snapshot of the file itself, the journal state and the file's identity
// are unchanged. read_snapshot checks it after `use`; a caller that parses
// more of the snapshot later may check it again.
bool snapshot_current(const std::filesystem::path& path, const SnapshotFile& file);

// Whether `path` still names the file of `file` (the same device and inode,
// following symbolic links): false once a rewrite renamed another file over
// it or the file was removed. Errors: Error(io) when `path` cannot be
// looked at (other than not existing).
bool same_file(const std::filesystem::path& path, const SnapshotFile& file);

// The directory of the archive's committed state now (read_snapshot of
// `path`), when `path` still names the file of `file`; nullopt when it names
// another file now (whose offsets say nothing about `file`'s bytes).
//
// An in-place commit (an append, a removal: FORMAT.md 8.1, 8.5) never moves
// or rewrites an entry that stays: it writes over the old tail and, after
// the commit, over the first bytes of the ranges it freed. So an entry of
// `file`'s snapshot that this directory still lists at the same local
// header offset, with the same name, method, CRC-32 and sizes
// (same_entry), holds the bytes it held when the snapshot was read: a
// mismatch in them is damage, not another writer's bytes.
//
// Errors: as read_snapshot (the archive kept changing, it does not parse).
std::optional<Directory> current_directory(const std::filesystem::path& path,
                                           std::string_view tail_entry, const SnapshotFile& file,
                                           const Limits& limits);

// Whether the archive's committed state now (read_snapshot of `path`) is
// the one `file`'s snapshot `bytes` holds, when the cheap check says it may
// not be (snapshot_current false): the same file (device, inode), the same
// tail start, and the same tail bytes from there to the end (tags.txt, the
// central directory, the end records), which every commit rewrites. An
// append still in flight (its journal's archive is the old one), a
// rolled-back append and a `touch` leave them as they were. Returns the
// SnapshotFile of the state found (with `file`'s descriptor), against which
// snapshot_current is the cheap check from then on; nullopt when the state
// differs or cannot be read (the file no longer parses, it kept changing
// during every attempt). Reads the tail: tens of KiB for hundreds of entries.
std::optional<SnapshotFile> same_committed_state(const std::filesystem::path& path,
                                                 std::string_view tail_entry,
                                                 const SnapshotFile& file, const Bytes& bytes,
                                                 const Limits& limits);

// Whether `now` lists `entry` as it is: same name, local header offset,
// method, CRC-32 and sizes.
bool same_entry(const Directory& now, const EntryInfo& entry);

}  // namespace modelzip::zip
