// Where the bytes of a zip archive go, as the append path sees them
// (FORMAT.md section 8.1): every byte of a modelzip archive belongs to an
// entry (local header and data), the central directory or the end records,
// and the archive's *tail* -- its last entry (tags.txt for modelzip), the
// central directory and the end records -- is what an append overwrites.
//
// Pure functions of a parsed Directory and the file's bytes; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "zip/zip_directory.hpp"

namespace modelzip::zip {

// The first byte an append may overwrite: the local header of `tail_entry`
// if that entry's data ends exactly where the central directory begins,
// else the start of the central directory. Everything before it stays as it
// is while the file is the same archive or an appended successor.
std::uint64_t tail_start(const Directory& directory, std::string_view tail_entry);

// Bytes of `file` that no entry (local header + data), the central directory
// or the end records (ZIP64 records, end-of-central-directory record and its
// comment) cover: gaps between entries, data descriptors, and anything after
// the end record.
std::uint64_t unused_bytes(const Directory& directory, std::span<const std::byte> file);

// Whether the archive can be appended to in place: every byte before the
// tail belongs to an entry or to a freed range (zip/free_range.hpp: a gap
// that starts with a local header, left by an in-place removal), no other
// byte is unused (so no trailing bytes), `tail_entry` is the entry with the
// greatest offset and ends where the central directory begins, and the file
// ends with the end-of-central-directory record and its comment (the ZIP64
// records may stand between the central directory and it).
bool appendable_in_place(const Directory& directory, std::span<const std::byte> file,
                         std::string_view tail_entry);

}  // namespace modelzip::zip
