// Staging memory for background saves: host memory that holds a copy of a
// tag's bytes while the copy is written, and the parallel copy that fills it.
//
// StagingBuffer owns an io::anonymous_buffer of ordinary pages (see there
// why not huge pages). It is not copyable; share it through std::shared_ptr, whose aliasing
// constructor lets Bytes views keep it alive (see tag_snapshot.hpp).
//
// StagingPool keeps idle staging buffers between the background saves of
// this process (BackgroundSave and BackgroundCollectiveSave share it).
//
// Thread safety: a StagingBuffer is plain memory; callers partition it.
// parallel_copy is reentrant; StagingPool is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "io/anonymous_buffer.hpp"

namespace modelzip::detail {

class StagingBuffer {
 public:
  // At least `capacity` bytes (0 allowed). Throws std::bad_alloc when the
  // system refuses the memory.
  explicit StagingBuffer(std::size_t capacity);

  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;

  std::byte* data() const noexcept { return data_.get(); }
  std::size_t capacity() const noexcept { return capacity_; }

 private:
  io::AnonymousBuffer data_;
  std::size_t capacity_;
};

// The process's idle staging buffers: at most two (a save writing while the
// next one is queued needs two), the largest ones. Allocated once and never
// destroyed, so that save threads still running during static destruction
// never see it gone.
class StagingPool {
 public:
  static StagingPool& instance();

  // An idle buffer of at least `size` bytes, or a new one (rounded up to
  // 2 MiB; the idle ones, all too small, are freed first). Throws
  // std::bad_alloc. `was_idle`, when given, tells which.
  std::shared_ptr<StagingBuffer> take(std::size_t size, bool* was_idle = nullptr);
  // Keeps `buffer` (which has no other owner left) for a later save.
  void offer(std::shared_ptr<StagingBuffer> buffer);
  // Frees the idle buffers.
  void drop_idle();
  // What a save does with its buffer when it ends: offer() it when
  // `keep` (and nobody else holds it), else drop_idle(); `buffer` is
  // reset either way.
  void release(std::shared_ptr<StagingBuffer>& buffer, bool keep);

 private:
  StagingPool() = default;
  static constexpr std::size_t kMostIdle = 2;
  std::mutex mutex_;
  std::vector<std::shared_ptr<StagingBuffer>> idle_;
};

// A staging buffer taken from the pool for a caller that fills it itself
// (Python's fetch of CUDA tensors for a background save, which then adopts
// it: BackgroundSaveOptions::adopt; or for a blocking save that writes from
// it). Share it through std::shared_ptr (as the keeper of Bytes views); when
// the last owner lets go, the buffer goes back to the pool (`keep`,
// StagingPool::release), or, without `keep`, is freed if it was allocated
// for this lease and offered back if it was an idle buffer of the pool: a
// save that keeps no staging memory leaves the pool as it found it (the
// pool's other idle buffers are left alone). Thread safety: as
// StagingBuffer.
class StagingLease {
 public:
  // A buffer of at least `size` bytes (StagingPool::take; throws
  // std::bad_alloc).
  StagingLease(std::size_t size, bool keep);
  ~StagingLease();
  StagingLease(const StagingLease&) = delete;
  StagingLease& operator=(const StagingLease&) = delete;

  std::byte* data() const noexcept { return buffer_->data(); }
  std::size_t capacity() const noexcept { return buffer_->capacity(); }
  // Whether the buffer goes back to the pool at the end (the save that
  // adopts it decides: BackgroundSaveOptions::keep_staging).
  void set_keep(bool keep) noexcept { keep_ = keep; }

 private:
  bool was_idle_ = false;  // before buffer_: set while buffer_ is taken
  std::shared_ptr<StagingBuffer> buffer_;
  bool keep_;
};

struct CopyJob {
  const std::byte* from;
  std::byte* to;
  std::size_t size;
};

// Threads worth using to copy `total_bytes`: one per core (at most 8), fewer
// for small copies (a thread per 16 MiB), at least 1.
unsigned copy_threads_for(std::uint64_t total_bytes) noexcept;

// Performs every job (non-overlapping ranges) with up to `threads` threads,
// the calling thread being one of them; long jobs are split into 8 MiB
// pieces. With `crcs` (at least one per job), also stores the CRC-32 of each job's
// bytes there: each piece is copied in blocks that fit the core's cache and
// each block checksummed from the copy right after it is copied (one pass
// over memory), the pieces' CRCs combined with zlib's crc32_combine. Falls
// back to fewer threads when the system refuses to start one. Does not
// throw.
void parallel_copy(std::span<const CopyJob> jobs, unsigned threads,
                   std::span<std::uint32_t> crcs = {}) noexcept;

}  // namespace modelzip::detail
