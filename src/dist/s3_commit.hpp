// The collective commit onto one S3 object (s3://BUCKET/KEY): N ranks, one
// multipart upload (docs/s3-writes.md, "Collective saves").
//
// The phases of dist::CommitTarget, with an upload instead of a file:
//  - the root opens the old object (its ETag read at open) and creates the
//    upload at begin(); its id goes to every rank in the plan (Plan::file);
//  - every rank surveys its share first (s3_survey: a dry run of
//    write_rank_share through a sink that only records where bytes go),
//    which gives the entries' CRCs before any upload and the runs of at
//    least 5 MiB that it writes alone;
//  - the root lays out the parts (S3CommitTarget::lay_out): each such run
//    of a rank other than the root becomes that rank's parts, numbered by
//    the layout; every other byte (the root's, and runs under 5 MiB) is
//    the root's. Where the root's bytes between two ranks' runs are fewer
//    than S3's 5 MiB part minimum, its range is widened into the next run
//    (whose rank sends those first bytes to the root); a run left under
//    5 MiB goes to the root whole. The old object's prefix on an append is
//    the root's too: its first parts are UploadPartCopy parts
//    (remote::S3UploadSink::keep, as a single-process append copies it),
//    and so is the data of a stored blob of at least 10 MiB that a rotation
//    moves (its new local header uploaded, its data copied from the old
//    object, as a single writer's rotation copies it);
//  - every rank writes its share and the local headers it owns (the CRCs
//    are known) through s3_upload_share: its runs go up as parts of the
//    shared upload, its other bytes to the root in the gather that also
//    carries its parts' ETags;
//  - the root writes those bytes and the tail (tags.txt, central directory,
//    end records) and completes the upload with the single writer's
//    condition (If-Match: the ETag read at open, If-None-Match: * for a
//    new key). Any failure before: the root's upload is aborted
//    (AbortMultipartUpload) and the old object stays.
// Not thread-safe. Errors: as remote::S3UploadSink, Error(invalid_argument)
// for a layout that does not fit the plan.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dist/commit_messages.hpp"
#include "dist/commit_plan.hpp"
#include "dist/commit_target.hpp"
#include "io/byte_sink.hpp"
#include "modelzip/archive.hpp"
#include "zip/zip_directory.hpp"

namespace modelzip::dist {

// A range of the new object that one rank (not the root) uploads as the
// parts numbered from first_part on.
struct S3Run {
  std::uint64_t offset = 0, length = 0;
  int rank = 0, first_part = 0;
};

// Broadcast by the root after the surveys.
struct S3Layout {
  std::uint64_t part_size = 0;
  std::vector<std::uint32_t> crcs;  // by Plan::entries
  std::vector<S3Run> runs;          // by offset
};
std::string encode_layout(const S3Layout& layout);
S3Layout decode_layout(const std::string& bytes, int root);

// A rank's survey of its share (message to the root): its pieces' CRCs
// (dist/rank_share.hpp) and the runs of at least 5 MiB it writes.
std::string s3_survey(const Plan& plan, const std::vector<Item>& items, int rank);

// What a rank did (message to the root): its parts and uploaded bytes,
// and the bytes of its share that the layout gives to the root.
struct S3RankResult {
  std::uint64_t uploaded = 0;
  std::string message;
};

// A rank's upload: its runs of `layout` as parts of the upload `plan.file`
// of `url`; its other bytes into the message for the root. `root_sink`
// (the root only): the target's sink, which takes all the root's bytes.
// Writes this rank's share, its blob and local headers with the layout's
// CRCs; the root's own entries are the caller's.
S3RankResult s3_upload_share(const std::string& url, const Plan& plan, const S3Layout& layout,
                             const std::vector<Item>& items, int rank, io::ByteSink* root_sink);

// The entries' directory information with the layout's CRCs (the root;
// their local headers are written by their header ranks).
std::vector<zip::EntryInfo> s3_entry_infos(const Plan& plan, const S3Layout& layout);

// The root's side: the old object, the upload and the commit.
class S3CommitTarget {
 public:
  // Opens the object at `url` if there is one (an archive not in the append
  // layout is rewritten into it first, as the single writer does).
  explicit S3CommitTarget(std::string url);
  ~S3CommitTarget();  // aborts the upload unless it completed
  S3CommitTarget(const S3CommitTarget&) = delete;
  S3CommitTarget& operator=(const S3CommitTarget&) = delete;

  const Archive* old() const noexcept;

  // Creates the upload (after the clean-up of stale uploads of the key);
  // a new archive's modelzip.toml goes in first. Start::file is the
  // upload's id. `kept` (existing archive; null: all): the old entries the
  // new directory lists (a rotation); the others' bytes stay in the object,
  // copied, as free entries whose local headers the root uploads
  // (checkpoint::keep_in_place), as a local collective commit formats them
  // after its commit point.
  CommitTarget::Start begin(const std::string& tag,
                            const std::set<const zip::EntryInfo*>* kept = nullptr);

  // From every rank's survey (by rank): the layout, its CRCs combined.
  // The new entries end at `end`; `root_entries` are those the root will
  // write (write_root_entry), before every rank's bytes. Sets up the
  // root's sink for it.
  S3Layout lay_out(const std::vector<std::string>& surveys, const Plan& plan, std::uint64_t end,
                   int root, const ErrorContext& context,
                   const std::vector<RootEntry>& root_entries = {});

  // Writes one of the root's entries into sink(): a moved blob
  // (RootEntry::from) as its new local header and a server-side copy of its
  // old data, any other as its bytes. Returns its directory record.
  zip::EntryInfo write_root_entry(const RootEntry& entry);

  io::ByteSink& sink();

  // The other ranks' results (by rank; the root's is ignored): their bytes
  // written, their parts added. Returns the bytes all ranks uploaded.
  std::uint64_t take_results(const std::vector<std::string>& results, int root);
  // Bytes uploaded in UploadPart bodies by all ranks (after take_results).
  std::uint64_t uploaded() const;
  std::uint64_t uploaded_by_others() const;

  // Writes the tail after `end_of_data` (the old entries but tags.txt, or
  // the kept ones of begin(), then `written`, then tags.txt of `tags`) and
  // completes the upload. `*visible` becomes true once it completed.
  void finish(const std::vector<zip::EntryInfo>& written, const std::vector<std::string>& tags,
              std::uint64_t end_of_data, bool* visible);

  // After finish() of a commit that kept only some old entries: whether the
  // new object holds more unused bytes (free entries) than live ones, the
  // rule after which a collective commit rewrites the archive. Computed
  // from the layout, without a request.
  bool mostly_free() const noexcept;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace modelzip::dist
