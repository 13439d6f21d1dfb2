// Rotation of a commit that adds one tag written by others (the collective
// commit, dist/commit_plan.hpp): replacing the tag of the same name and
// keeping only the newest tags, resolved by the Writer's own plan
// (checkpoint/archive_plan.hpp) so that both remove tags alike. A removed tag's
// blob that a remaining tag (the new one included) still references moves
// into the oldest such tag, and every table that references it is
// rewritten; every other entry of a removed tag is dropped. The result is
// what an in-place commit writes (WriterOptions::append): the old entries
// kept where they are, the tables and moved blobs to write anew.
// Errors: Error(not_found)/Error(corrupt) as Writer::commit (a kept tag
// whose tables are damaged, when the rotation rewrites any table).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "format/blob_table.hpp"
#include "modelzip/archive.hpp"
#include "zip/zip_directory.hpp"

namespace modelzip::checkpoint {

// The new tag as the committer planned it: its rows (new blobs with an
// empty ref.tag and indices below `new_blobs`; references to blobs of the
// old archive's tags) and the rotation asked for.
struct RotationInput {
  std::string tag;
  std::vector<format::BlobRow> params, updater;
  bool has_updater = false;
  std::uint64_t new_blobs[2] = {0, 0};   // by TableKind
  bool replace = false;                  // remove the old tag of this name (any case)
  std::optional<std::size_t> keep_last;  // then keep only the newest n tags
};

struct Rotation {
  std::vector<std::string> tags;  // after the commit, oldest first (the new one last)
  // The new tag's rows, references to moved blobs rewritten.
  std::vector<format::BlobRow> params, updater;
  // Blobs of removed tags that move: the old entry, copied as `entry`.
  struct Moved {
    const zip::EntryInfo* from = nullptr;
    std::string entry;
  };
  std::vector<Moved> moved;
  // Tables of kept tags whose references were rewritten: entry name, content.
  std::vector<std::pair<std::string, std::string>> tables;
  // The old entries that stay where they are (all others but tags.txt are
  // freed: zip::AppendSession::Options::keep_entry).
  std::set<const zip::EntryInfo*> kept;
  bool removes = false;  // some old tag is removed
};

// `old` is the archive the commit appends to; its tag names do not clash
// with `in.tag` unless `in.replace`.
Rotation plan_rotation(const Archive& old, const RotationInput& in);

}  // namespace modelzip::checkpoint
