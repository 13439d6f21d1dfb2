// Progress reports for long operations (saves, copying loads, verify).
//
// Thread safety: Progress is a plain value; a callback is only called from
// the thread that runs the operation it was given to.
#pragma once

#include <cstdint>
#include <functional>

namespace modelzip {

struct Progress {
  std::uint64_t bytes_done = 0;
  std::uint64_t bytes_total = 0;
  bool operator==(const Progress&) const = default;
};
// Called from the thread doing the work, at least once at the end
// (bytes_done == bytes_total). Return false to cancel: the operation then
// throws Error(cancelled) and leaves nothing half-done behind (a cancelled
// commit keeps the previous archive). The callback must not throw.
using ProgressCallback = std::function<bool(const Progress&)>;

}  // namespace modelzip
