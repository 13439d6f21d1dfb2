// CRC-32s computed on background threads while the thread that queued the
// bytes goes on, typically writing those same bytes: the CRC then costs the
// writing thread nothing. The queuing thread never waits for the workers
// until it asks for the results, and then computes whatever no worker has
// started itself, so a worker that gets no CPU time delays nothing by
// more than the one range it is checksumming.
//
// Workers: at most `max_workers` (default: one less than the cores this
// process may run on, at least 1, at most 8). The first push() starts one;
// a push() that leaves more than one range unstarted starts another (the
// workers fall behind: the caller queues faster than one thread
// checksums, e.g. a whole tensor split into ranges before asking its
// result), so a writer whose writes are slower than the CRC keeps one.
//
// Bytes are grouped in slots: the result of a slot is the CRC-32 of the
// concatenation of the ranges queued into it, in queuing order.
//
// Lifetime: a queued Bytes is kept (shared) until finish() returns or the
// queue is destroyed; memory borrowed with a null keeper must stay valid
// that long. The workers are joined by finish() or the destructor (after
// at most the range each is working on).
// Not thread-safe: one thread calls new_slot, push and finish. Errors: none
// (if no thread can be started, the caller computes every CRC itself).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "modelzip/bytes.hpp"

namespace modelzip::zip {

class CrcQueue {
 public:
  CrcQueue() : CrcQueue(default_workers()) {}
  explicit CrcQueue(std::size_t max_workers) : max_workers_(max_workers == 0 ? 1 : max_workers) {}
  ~CrcQueue();
  CrcQueue(const CrcQueue&) = delete;
  CrcQueue& operator=(const CrcQueue&) = delete;

  // A new, empty slot (its CRC is 0 unless bytes are pushed into it).
  std::size_t new_slot() { return slots_++; }
  // Queues `bytes` at the end of `slot`.
  void push(std::size_t slot, Bytes bytes);
  // The CRC-32 of `slot` as queued so far, once every range of it is
  // checksummed: computes the ranges the worker has not started (those
  // queued before the slot's last one, in order) on the calling thread and
  // waits for the rest. For a slot the caller queues nothing more into;
  // the ranges stay queued (finish() still reports the slot).
  std::uint32_t result(std::size_t slot);
  // The CRC-32 of every slot, by slot number. Computes the ranges the worker
  // has not started on the calling thread, waits for the rest, stops the
  // worker. The queue is empty afterwards (slots start again from 0).
  std::vector<std::uint32_t> finish();
  // Waits for the ranges being checksummed and drops every queued range and
  // slot (slots start again from 0); the workers stay for later pushes.
  void forget();

  // Worker threads started since construction or the last finish().
  std::size_t workers_started() const noexcept { return workers_.size(); }
  // The default cap on workers: the cores this process may run on minus
  // one (the queuing thread's), from 1 to 8.
  static std::size_t default_workers() noexcept;

 private:
  struct Range {
    std::size_t slot;
    Bytes bytes;
    std::uint32_t crc = 0;
  };
  // Claims the next unstarted range under `lock`, computes it without the
  // lock, records the result; false if none was left to start.
  bool work_one(std::unique_lock<std::mutex>& lock);
  void run();
  void stop();

  std::size_t slots_ = 0;
  // Per slot: the index in ranges_ of its first range, and how many of its
  // ranges are not checksummed yet (guarded by mutex_).
  std::vector<std::size_t> first_range_;
  std::vector<std::size_t> unfinished_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Range> ranges_;  // guarded by mutex_
  std::size_t started_ = 0;   // ranges claimed by a thread; guarded by mutex_
  std::size_t finished_ = 0;  // ranges whose CRC is recorded; guarded by mutex_
  bool stopping_ = false;     // guarded by mutex_
  bool thread_failed_ = false;
  std::size_t max_workers_;
  std::vector<std::thread> workers_;
};

}  // namespace modelzip::zip
