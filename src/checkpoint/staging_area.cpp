#include "checkpoint/staging_area.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <system_error>
#include <thread>
#include <vector>

namespace modelzip::detail {

namespace {
constexpr std::size_t kPiece = std::size_t{8} << 20;      // one unit of work of parallel_copy
constexpr std::uint64_t kBytesPerThread = 16ull << 20;  // below this a thread costs more than it saves
constexpr unsigned kMaxThreads = 8;
}  // namespace

StagingBuffer::StagingBuffer(std::size_t capacity)
    : data_(io::anonymous_buffer(capacity, false)), capacity_(capacity) {}

unsigned copy_threads_for(std::uint64_t total_bytes) noexcept {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::uint64_t by_size = std::max<std::uint64_t>(1, total_bytes / kBytesPerThread);
  return static_cast<unsigned>(std::min<std::uint64_t>({cores, kMaxThreads, by_size}));
}

void parallel_copy(std::span<const CopyJob> jobs, unsigned threads) noexcept {
  std::vector<CopyJob> pieces;
  try {
    for (const CopyJob& j : jobs)
      for (std::size_t at = 0; at < j.size; at += kPiece)
        pieces.push_back({j.from + at, j.to + at, std::min(kPiece, j.size - at)});
  } catch (const std::bad_alloc&) {
    for (const CopyJob& j : jobs)
      if (j.size > 0) std::memcpy(j.to, j.from, j.size);
    return;
  }
  std::atomic<std::size_t> next{0};
  auto work = [&]() noexcept {
    for (std::size_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < pieces.size();)
      std::memcpy(pieces[k].to, pieces[k].from, pieces[k].size);
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
}

}  // namespace modelzip::detail
