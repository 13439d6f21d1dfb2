// The root's plan of a collective commit: it validates every rank's
// records together (dtypes, global shapes, blocks that cover each tensor
// exactly once, tag-level entries), decides dedup references, and lays out
// the new entries after the archive's data exactly as the single writer
// places them (params.txt, updater.txt, tag-level entries, then the blobs
// in parameter order), each placed by zip::EntryPlan. Planning begins the
// commit on the target (journal or temporary file), protects the old tail
// and allocates the new entries' blocks.
// Not thread-safe (the target). Errors: Error(invalid_argument) naming the
// parameter and ranks; Error(not_found) for a share of a missing tag; the
// target's errors.
// The target is either a local file (dist/commit_target.hpp: planning is
// followed by prepare_file) or an S3 upload (dist/s3_commit.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dist/commit_messages.hpp"
#include "dist/commit_target.hpp"

namespace modelzip::dist {

// An entry the root writes itself (params.txt, updater.txt, tag-level
// entries), with its content.
struct RootEntry {
  PlannedEntry entry;
  std::string content;
};

struct CommitPlan {
  Plan plan;  // broadcast to every rank
  std::vector<RootEntry> root_entries;
  std::uint64_t blobs_written = 0, blobs_deduplicated = 0;
  std::uint64_t start = 0, end = 0;  // the new entries' bytes
};

// `all`: every rank's records, by rank. `old`: the archive committed to
// (null: a new one). `begin`: the target's begin() (the journal, the
// temporary file or the upload). `dedup`: reference old blobs where every
// rank's block equals its namesake.
CommitPlan plan_commit(const std::vector<std::vector<Record>>& all, const std::string& tag,
                       const Archive* old, const std::function<CommitTarget::Start()>& begin,
                       bool dedup, int root);

// A local target: protects the old tail beyond everything the plan writes
// and allocates the new entries' blocks (before any rank writes).
void prepare_file(CommitTarget& target, const CommitPlan& plan, const std::string& tag);

}  // namespace modelzip::dist
