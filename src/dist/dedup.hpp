// Dedup of a collective commit: each rank compares what it staged with
// the same region of its namesake in the archive's newest tag, and tells
// the root in its records (equals_namesake); the root references the old
// blob where every rank's block matched (dist/commit_plan.hpp). Text,
// staged whole, is looked for as the single writer looks for any blob:
// the namesake first, then any blob of the same size and CRC-32.
// Thread safety: as Archive's reads. Errors: Error from reading `old`.
#pragma once

#include <cstdint>
#include <vector>

#include "dist/commit_messages.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/writer.hpp"

namespace modelzip::dist {

// Records of this rank's `items` and tag-level `entries`; with `old` (dedup
// on and the archive existing), each dense tensor (block) is compared with
// the same region of its namesake in old's newest tag. Text goes to the
// root as its size and CRC-32 and, with `old`, the old blob of the same
// bytes (Record::same_blob): its namesake in the newest tag, else the
// first stored blob of the same table, size and CRC-32 (oldest tag first,
// then by index) that holds the same bytes, as Writer's dedup picks it.
// old's directory is read once per call (an index by size and CRC-32),
// whatever the number of texts.
std::vector<Record> records_with_dedup(const std::vector<Item>& items, const NewTag& entries,
                                       int rank, const Archive* old);

// The directory entries of old archives that text dedup has looked at in
// this process so far (tests count the work of a commit with it).
std::uint64_t text_dedup_entries_examined() noexcept;

}  // namespace modelzip::dist
