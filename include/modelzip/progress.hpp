// Progress reports for long operations (saves, copying loads, verify).
//
// Thread safety: Progress is a plain value; a callback is only called from
// the thread that runs the operation it was given to.
#pragma once

#include <cstdint>
#include <functional>

#include "modelzip/export.hpp"

namespace modelzip {

struct MODELZIP_API Progress {
  // What the bytes count. A commit with dedup first compares the new
  // tensors with the archive's blobs (reading both: slow on a cold archive)
  // before it writes anything; every other report is `work` (what the
  // operation is for: writing, reading, checking).
  enum class Stage : std::uint8_t { work, compare };
  std::uint64_t bytes_done = 0;
  std::uint64_t bytes_total = 0;
  Stage stage = Stage::work;
  bool operator==(const Progress&) const = default;
};
// Called from the thread doing the work, at least once at the end of each stage (bytes_done ==
// bytes_total; each stage counts from 0, again after a notice that an s3:// commit is planned anew:
// WriterOptions::on_notice). Return false to cancel: the operation then throws Error(cancelled)
// and leaves nothing half-done behind (a cancelled commit keeps the previous archive). No throws.
using ProgressCallback = std::function<bool(const Progress&)>;

}  // namespace modelzip
