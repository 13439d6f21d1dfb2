// The root's plan of a collective commit: it validates every rank's
// records together (dtypes, global shapes, blocks that cover each tensor
// exactly once, text equal on every rank that staged it (compared byte
// for byte by the ranks: text_checks), tag-level
// entries; with graph.fb, the tag as a graph
// checkpoint: schemas/GRAPH.md section 4), decides dedup references, and
// lays out the new entries after the archive's data exactly as the single
// writer places them (params.txt, updater.txt, tag-level entries, then the blobs
// in parameter order), each placed by zip::EntryPlan. Planning begins the
// commit on the target (journal or temporary file), protects the old tail
// and allocates the new entries' blocks.
// Not thread-safe (the target). Errors: Error(invalid_argument) naming the
// parameter and ranks, or the tag and entry of a broken graph checkpoint
// rule (nothing begun on the target); Error(not_found) for a share of a
// missing tag; the target's errors.
// The target is either a local file (dist/commit_target.hpp: planning is
// followed by prepare_file) or an S3 upload (dist/s3_commit.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dist/commit_messages.hpp"
#include "dist/commit_target.hpp"

namespace modelzip::dist {

// An entry the root writes itself (params.txt, updater.txt, tag-level
// entries, text blobs; with a rotation, the rewritten tables of kept tags and the blobs
// that move, viewed in the old archive), with its content and, when known,
// its CRC-32.
struct RootEntry {
  PlannedEntry entry;
  Bytes content;
  std::optional<std::uint32_t> crc{};
  // A moved blob stored in the old archive: its entry there, whose data is
  // `content` (an S3 commit copies it server-side instead of uploading it).
  // `content` then views the old archive's bytes unread: a remote archive's
  // may not be fetched yet (io::ByteSource::ensure them before use).
  const zip::EntryInfo* from = nullptr;
};

struct CommitPlan {
  Plan plan;  // broadcast to every rank
  std::vector<RootEntry> root_entries;
  std::uint64_t blobs_written = 0, blobs_deduplicated = 0;
  std::uint64_t start = 0, end = 0;  // the new entries' bytes
  // The archive's tags after the commit, oldest first.
  std::vector<std::string> tags;
  // With a rotation: the old entries that stay listed (the others but
  // tags.txt become free ranges once committed); unset: all stay.
  std::optional<std::set<const zip::EntryInfo*>> kept;
};

// What the commit removes with the new tag (CollectiveCommitOptions).
struct RotateRequest {
  bool replace = false;
  std::optional<std::size_t> keep_last;
};

// The texts whose bytes the ranks compare before the root plans (root, from
// every rank's records `all`; rounds of `chunk` bytes). Each text is
// checked against the text of the rank that writes it (the root if it
// staged it, else the lowest rank that did): a name
// staged as text by several ranks with equal shape, size and CRC-32 is
// compared byte for byte (equal CRCs may hide other texts), unless every
// such rank found the same old blob byte for byte (Record::same_blob);
// with `dedup`, a text of the new tag of the same table, size and CRC-32
// as an earlier one (and found in no old blob) is compared with it, to be
// stored once as Writer's dedup stores it. Records that plan_commit
// refuses are left out.
TextChecks text_checks(const std::vector<std::vector<Record>>& all, bool dedup, int root,
                       std::size_t chunk);

// `all`: every rank's records, by rank. `old`: the archive committed to
// (null: a new one). `begin`: the target's begin() (the journal, the
// temporary file or the upload), given the old entries to keep listed
// (null: all). `dedup`: reference old blobs where every rank's block equals
// its namesake. `rotate`: tags to remove in the same commit, resolved by
// checkpoint::plan_rotation (an old archive only; the caller refuses it
// for a target without free ranges).
using Begin = std::function<CommitTarget::Start(const std::set<const zip::EntryInfo*>* kept)>;
// `checked`: text_checks with the ranks' verdicts: a text that differs
// from its writer's fails the commit; one equal to an earlier text of the
// tag references its blob.
CommitPlan plan_commit(const std::vector<std::vector<Record>>& all, const std::string& tag,
                       const Archive* old, const Begin& begin, bool dedup, int root,
                       const TextChecks& checked, const RotateRequest& rotate = {});

// A local target: protects the old tail beyond everything the plan writes
// and allocates the new entries' blocks (before any rank writes).
void prepare_file(CommitTarget& target, const CommitPlan& plan, const std::string& tag);

}  // namespace modelzip::dist
