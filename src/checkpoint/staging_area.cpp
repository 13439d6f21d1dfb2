#include "checkpoint/staging_area.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <system_error>
#include <thread>
#include <vector>

#include "core/crc32.hpp"

namespace modelzip::detail {

namespace {
constexpr std::size_t kPiece = std::size_t{8} << 20;  // one unit of work of parallel_copy
constexpr std::uint64_t kBytesPerThread = 16ull
                                          << 20;  // below this a thread costs more than it saves
constexpr unsigned kMaxThreads = 8;
// A block copied and then checksummed while it is still in the core's cache.
constexpr std::size_t kCrcBlock = std::size_t{128} << 10;

struct Piece {
  CopyJob copy;
  std::size_t job;
};

// Copies `p` and returns the CRC-32 of its bytes.
std::uint32_t copy_with_crc(const CopyJob& p) noexcept {
  std::uint32_t crc = 0;
  for (std::size_t at = 0; at < p.size; at += kCrcBlock) {
    const std::size_t n = std::min(kCrcBlock, p.size - at);
    std::memcpy(p.to + at, p.from + at, n);
    crc = detail::crc32_update(crc, {p.to + at, n});
  }
  return crc;
}
}  // namespace

StagingBuffer::StagingBuffer(std::size_t capacity)
    : data_(io::anonymous_buffer(capacity, false)), capacity_(capacity) {}

StagingPool& StagingPool::instance() {
  static StagingPool* pool = new StagingPool;
  return *pool;
}

std::shared_ptr<StagingBuffer> StagingPool::take(std::size_t size, bool* was_idle) {
  if (was_idle) *was_idle = false;
  {
    std::lock_guard lock(mutex_);
    for (auto& buffer : idle_)
      if (buffer->capacity() >= size) {
        std::shared_ptr<StagingBuffer> found = std::move(buffer);
        std::erase(idle_, nullptr);
        if (was_idle) *was_idle = true;
        return found;
      }
    idle_.clear();  // all too small: free them before allocating
  }
  constexpr std::size_t kRound = std::size_t{2} << 20;
  const std::size_t rounded =
      size > SIZE_MAX - kRound ? size : (size + kRound - 1) / kRound * kRound;
  return std::make_shared<StagingBuffer>(rounded);
}

void StagingPool::offer(std::shared_ptr<StagingBuffer> buffer) {
  std::lock_guard lock(mutex_);
  idle_.push_back(std::move(buffer));
  if (idle_.size() > kMostIdle) {
    auto smallest = std::min_element(idle_.begin(), idle_.end(), [](const auto& a, const auto& b) {
      return a->capacity() < b->capacity();
    });
    idle_.erase(smallest);
  }
}

void StagingPool::drop_idle() {
  std::lock_guard lock(mutex_);
  idle_.clear();
}

void StagingPool::release(std::shared_ptr<StagingBuffer>& buffer, bool keep) {
  std::shared_ptr<StagingBuffer> ending = std::move(buffer);
  if (!keep)
    drop_idle();
  else if (ending && ending.use_count() == 1)
    offer(std::move(ending));
}

StagingLease::StagingLease(std::size_t size, bool keep)
    : buffer_(StagingPool::instance().take(size, &was_idle_)), keep_(keep) {}

StagingLease::~StagingLease() {
  if (keep_)
    StagingPool::instance().release(buffer_, true);
  else if (was_idle_ && buffer_.use_count() == 1)
    StagingPool::instance().offer(std::move(buffer_));
}

unsigned copy_threads_for(std::uint64_t total_bytes) noexcept {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::uint64_t by_size = std::max<std::uint64_t>(1, total_bytes / kBytesPerThread);
  return static_cast<unsigned>(std::min<std::uint64_t>({cores, kMaxThreads, by_size}));
}

void parallel_copy(std::span<const CopyJob> jobs, unsigned threads,
                   std::span<std::uint32_t> crcs) noexcept {
  const bool with_crc = !crcs.empty() && crcs.size() >= jobs.size();
  std::vector<Piece> pieces;
  std::vector<std::uint32_t> piece_crcs;
  try {
    for (std::size_t j = 0; j < jobs.size(); ++j)
      for (std::size_t at = 0; at < jobs[j].size; at += kPiece)
        pieces.push_back(
            {{jobs[j].from + at, jobs[j].to + at, std::min(kPiece, jobs[j].size - at)}, j});
    if (with_crc) piece_crcs.resize(pieces.size());
  } catch (const std::bad_alloc&) {
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      if (with_crc)
        crcs[j] = copy_with_crc(jobs[j]);
      else if (jobs[j].size > 0)
        std::memcpy(jobs[j].to, jobs[j].from, jobs[j].size);
    }
    return;
  }
  std::atomic<std::size_t> next{0};
  auto work = [&]() noexcept {
    for (std::size_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < pieces.size();) {
      const CopyJob& c = pieces[k].copy;
      if (with_crc)
        piece_crcs[k] = copy_with_crc(c);
      else
        std::memcpy(c.to, c.from, c.size);
    }
  };
  std::vector<std::thread> helpers;
  const std::size_t wanted = std::min<std::size_t>(std::max(threads, 1u), pieces.size());
  for (std::size_t i = 1; i < wanted; ++i) {
    try {
      helpers.emplace_back(work);
    } catch (const std::exception&) {
      break;  // no more threads: the ones started and this one do the rest
    }
  }
  work();
  for (auto& t : helpers) t.join();
  if (!with_crc) return;
  std::fill(crcs.begin(), crcs.end(), 0u);
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    std::uint32_t& crc = crcs[pieces[k].job];
    crc = detail::crc32_concat(crc, piece_crcs[k], pieces[k].copy.size);
  }
}

}  // namespace modelzip::detail
