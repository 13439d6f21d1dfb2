#include "zip/crc_queue.hpp"

#include <sched.h>

#include <algorithm>
#include <system_error>

#include "core/crc32.hpp"

namespace modelzip::zip {
namespace {
constexpr std::size_t kNone = static_cast<std::size_t>(-1);  // a slot with no range yet
}  // namespace

CrcQueue::~CrcQueue() {
  stop();
}

std::size_t CrcQueue::default_workers() noexcept {
  std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    cores = std::min(cores, static_cast<std::size_t>(CPU_COUNT(&set)));
  return std::clamp<std::size_t>(cores - 1, 1, 8);
}

void CrcQueue::stop() {
  if (workers_.empty()) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

void CrcQueue::push(std::size_t slot, Bytes bytes) {
  std::size_t unstarted;
  {
    std::lock_guard lock(mutex_);
    if (unfinished_.size() <= slot) {
      unfinished_.resize(slot + 1, 0);
      first_range_.resize(slot + 1, kNone);
    }
    if (first_range_[slot] == kNone) first_range_[slot] = ranges_.size();
    ++unfinished_[slot];
    ranges_.push_back(Range{slot, std::move(bytes)});
    unstarted = ranges_.size() - started_;
  }
  // A sleeping worker takes it (no system call when none sleeps).
  if (!workers_.empty()) cv_.notify_one();
  const bool behind = workers_.empty() || unstarted > 1;
  if (!behind || workers_.size() >= max_workers_ || thread_failed_) return;
  try {
    workers_.emplace_back([this] { run(); });
  } catch (const std::system_error&) {
    thread_failed_ = true;  // the caller computes what no worker takes
  }
}

bool CrcQueue::work_one(std::unique_lock<std::mutex>& lock) {
  if (started_ == ranges_.size()) return false;
  Range& r = ranges_[started_++];  // deque: stays put while others are appended
  const std::span<const std::byte> bytes = r.bytes.span();
  lock.unlock();
  const std::uint32_t crc = detail::crc32_of(bytes);
  lock.lock();
  r.crc = crc;
  ++finished_;
  if (--unfinished_[r.slot] == 0 || finished_ == started_) cv_.notify_all();
  return true;
}

std::uint32_t CrcQueue::result(std::size_t slot) {
  std::unique_lock lock(mutex_);
  if (slot >= unfinished_.size() || first_range_[slot] == kNone) return 0;  // nothing queued
  // Unstarted ranges are claimed in queuing order: computing them here
  // reaches the slot's last one without waiting for the worker's turn.
  while (unfinished_[slot] > 0 && work_one(lock)) {
  }
  cv_.wait(lock, [&] { return unfinished_[slot] == 0; });
  std::uint32_t crc = 0;
  bool seen = false;
  for (std::size_t i = first_range_[slot]; i < ranges_.size(); ++i) {
    const Range& r = ranges_[i];
    if (r.slot != slot) continue;
    crc = seen ? detail::crc32_concat(crc, r.crc, r.bytes.size()) : r.crc;
    seen = true;
  }
  return crc;
}

void CrcQueue::forget() {
  std::unique_lock lock(mutex_);
  // Nothing more is claimed, and the unclaimed ranges count as finished: the worker finishing
  // the last claimed range then sees finished_ == started_ and wakes this wait (waiting for
  // the claimed count alone missed that wake-up: no worker notifies for it).
  finished_ += ranges_.size() - started_;
  started_ = ranges_.size();
  cv_.wait(lock, [&] { return finished_ == started_; });
  ranges_.clear();
  first_range_.clear();
  unfinished_.clear();
  started_ = finished_ = 0;
  slots_ = 0;
}

void CrcQueue::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || started_ < ranges_.size(); });
    if (stopping_) return;
    work_one(lock);
  }
}

std::vector<std::uint32_t> CrcQueue::finish() {
  {
    std::unique_lock lock(mutex_);
    while (work_one(lock)) {
    }
    cv_.wait(lock, [this] { return finished_ == ranges_.size(); });
  }
  stop();
  std::vector<std::uint32_t> crc(slots_, 0);
  std::vector<bool> seen(slots_, false);
  for (const Range& r : ranges_) {
    crc[r.slot] = seen[r.slot] ? detail::crc32_concat(crc[r.slot], r.crc, r.bytes.size()) : r.crc;
    seen[r.slot] = true;
  }
  ranges_.clear();
  first_range_.clear();
  unfinished_.clear();
  started_ = finished_ = 0;
  stopping_ = false;
  slots_ = 0;
  thread_failed_ = false;
  return crc;
}

}  // namespace modelzip::zip
