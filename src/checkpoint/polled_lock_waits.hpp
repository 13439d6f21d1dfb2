// How a commit waits for another writer's lock on the calling thread.
#pragma once

namespace modelzip::checkpoint {

// While one lives on a thread, a commit on that thread that has to wait for
// another writer's lock asks WriterOptions::progress (0 of 0 bytes) every
// 50 ms instead of blocking until a signal comes, so that a stop set by
// another thread (a background save's, which its progress reads) ends the
// wait with Error(cancelled). Nests. Not copyable.
class PolledLockWaits {
 public:
  PolledLockWaits() noexcept { ++depth_; }
  ~PolledLockWaits() { --depth_; }
  PolledLockWaits(const PolledLockWaits&) = delete;
  PolledLockWaits& operator=(const PolledLockWaits&) = delete;
  // Whether one lives on the calling thread.
  static bool active() noexcept { return depth_ > 0; }

 private:
  static inline thread_local int depth_ = 0;
};

}  // namespace modelzip::checkpoint
