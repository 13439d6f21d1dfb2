// Opening an archive that a writer may be appending to: the reader protocol
// of FORMAT.md section 8.3.
//
// An append overwrites the archive's tail in place (zip/archive_layout.hpp)
// behind an append journal (io/append_journal.hpp). read_snapshot returns
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
// Otherwise it tries again, a bounded number of times. For a path that is a
// symbolic link, the journal is looked for beside the link and beside its
// target.
//
// The result is one contiguous read-only region: the untouched prefix
// mapped from the file (zero-copy, stays valid whatever later appends do),
// the tail a private copy. `directory`, when given, receives the parsed
// directory of the result if the protocol parsed it anyway (else it is left
// empty and the caller parses).
//
// `file`, when given, receives the descriptor of the file the snapshot
// came from and the length of the snapshot's stable prefix: its first bytes,
// which are that file's bytes at the same offsets for as long as the file
// exists (an append only overwrites from its tail on, a rewrite replaces
// the file), so they can be mapped from the file again later
// (Archive's private views). `identity` is the identity the file had
// throughout the read when the snapshot is the file itself (no valid
// journal before and after, identity unchanged); nullopt when the snapshot
// is the previous archive of a valid journal, whose removal (the commit of
// the append) leaves the file's identity as it was.
//
// Errors: Error(io) naming the path (cannot open or map; the archive kept
// changing through every attempt), Error(corrupt) from the directory parse
// of a file that is stable and does not parse. Thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
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

struct SnapshotFile {
  std::shared_ptr<const io::UniqueFd> fd;
  std::uint64_t stable_prefix = 0;
  std::optional<io::FileIdentity> identity;
  io::JournalState journal;  // as the read found it (kind absent: none)
};

Bytes read_snapshot(const std::filesystem::path& path, std::string_view tail_entry,
                    const Limits& limits, std::optional<Directory>* directory = nullptr,
                    SnapshotFile* file = nullptr);

// Whether the snapshot `file` describes (read_snapshot of `path`) is still
// the archive's committed state: the same journal is still there, or, for
// a snapshot of the file itself, the journal state and the file's identity
// are unchanged. The snapshot's prefix is mapped from the file, and after
// an in-place removal commits, its writer overwrites the first bytes of
// each freed range (free entries, FORMAT.md 8.5): a caller that parses
// more of the snapshot after read_snapshot returned (an Archive parses
// every tag's tables) checks this afterwards and reads again if it is
// false, or it may parse a removed entry's overwritten header.
bool snapshot_current(const std::filesystem::path& path, const SnapshotFile& file);

}  // namespace modelzip::zip
