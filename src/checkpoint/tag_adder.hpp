// Adding a staged tag (NewTag) to a plan (archive_plan.hpp): its entries
// checked by the validators of their kinds (entry_validators.hpp), a tag
// with graph.fb checked as a graph checkpoint before any blob is stored,
// shares resolved to the blobs they name, and with dedup each new blob
// replaced by a reference to an equal one (its namesake in the previous
// tag first, then checkpoint::DedupIndex's rule).
#pragma once

#include <memory>
#include <string>

#include "checkpoint/archive_impl.hpp"
#include "checkpoint/archive_plan.hpp"
#include "core/progress_tracker.hpp"
#include "modelzip/writer.hpp"

namespace modelzip::checkpoint {

class TagAdder {
 public:
  // Adds to `plan`, whose old entries are those of `old` (may be null),
  // counting blobs in `stats`. `comparing` (may be null) hears of the bytes
  // the dedup comparison reads. All are used until the TagAdder is gone.
  TagAdder(Plan& plan, const Archive::Impl* old, bool dedup, Writer::Stats& stats,
           detail::ProgressTracker* comparing);
  ~TagAdder();
  TagAdder(const TagAdder&) = delete;
  TagAdder& operator=(const TagAdder&) = delete;

  // Adds `tag` (not in the plan: Error otherwise) with `contents` as the
  // newest tag. Throws modelzip::Error naming the tag and entry or
  // parameter for invalid contents, a share of what does not exist, or a
  // broken graph checkpoint; the plan may then hold part of the tag.
  void add(const std::string& tag, const NewTag& contents);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace modelzip::checkpoint
