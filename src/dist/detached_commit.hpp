// DetachedCommit: the contents a CollectiveWriter has staged, taken out of
// it for a commit that runs elsewhere (dist/background_save.cpp runs it in a
// background thread after replacing every staged buffer by its snapshot).
//
// Ownership: it keeps the writer's path, options and communicator pointer
// (the communicator must outlive it) and owns the staged items and entries.
// Thread safety: one thread at a time.
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "modelzip/bytes.hpp"
#include "modelzip/dist/distributed.hpp"

namespace modelzip::dist {

class DetachedCommit {
 public:
  // Takes what `writer` has staged (the writer is left with nothing staged).
  explicit DetachedCommit(CollectiveWriter::Impl& writer);
  ~DetachedCommit();
  DetachedCommit(DetachedCommit&&) noexcept;
  DetachedCommit& operator=(DetachedCommit&&) noexcept;

  // Every staged buffer (tensor values, then tag-level entries), in the
  // order replace_buffers() takes their replacements.
  std::vector<const Bytes*> buffers() const;
  // Replaces the buffers buffers() listed by `copies` (same sizes).
  void replace_buffers(std::vector<Bytes> copies);

  // Makes run() fail with `error` at the commit's first agreed step, so
  // that every rank throws it (naming this rank) instead of waiting for
  // this rank forever.
  void fail_first_step(std::exception_ptr error);

  // The collective commit of tag `tag` (CollectiveWriter::commit).
  CollectiveStats run(const std::string& tag, const CollectiveCommitOptions& options = {});

  ErrorContext context() const;

 private:
  std::unique_ptr<CollectiveWriter::Impl> impl_;
};

}  // namespace modelzip::dist
