#include <doctest/doctest.h>

#include <cstring>
#include <thread>

#include "checkpoint/new_tag_contents.hpp"
#include "checkpoint/staging_area.hpp"
#include "checkpoint/tag_snapshot.hpp"
#include "core/crc32.hpp"
#include "test_support.hpp"
#include "zip/known_crcs.hpp"

using namespace modelzip;
using namespace modelzip::detail;

TEST_CASE("parallel_copy copies every job exactly, with any number of threads") {
  std::mt19937_64 rng(7);
  // Sizes around the 8 MiB piece boundary, an empty job and small ones.
  const std::size_t sizes[] = {0, 1, 63, (8u << 20) - 1, 8u << 20, (8u << 20) + 1, 20u << 20};
  std::vector<Bytes> sources;
  std::size_t total = 0;
  for (std::size_t s : sizes) {
    sources.push_back(testing::random_bytes(rng, s));
    total += s + 1;  // a guard byte after each destination
  }
  for (unsigned threads : {1u, 2u, 5u}) {
    INFO("threads " << threads);
    StagingBuffer staging(total);
    REQUIRE(staging.capacity() >= total);
    REQUIRE(reinterpret_cast<std::uintptr_t>(staging.data()) % (2u << 20) == 0);
    std::vector<CopyJob> jobs;
    std::size_t at = 0;
    for (const Bytes& b : sources) {
      jobs.push_back({b.data(), staging.data() + at, b.size()});
      at += b.size() + 1;
    }
    for (bool with_crc : {false, true}) {
      INFO("with CRC " << with_crc);
      std::memset(staging.data(), 0x5A, total);
      std::vector<std::uint32_t> crcs(jobs.size(), 0xDEADBEEF);
      if (with_crc)
        parallel_copy(jobs, threads, crcs);
      else
        parallel_copy(jobs, threads);
      at = 0;
      for (std::size_t j = 0; j < sources.size(); ++j) {
        const Bytes& b = sources[j];
        if (!b.empty()) CHECK(std::memcmp(staging.data() + at, b.data(), b.size()) == 0);
        CHECK(staging.data()[at + b.size()] == std::byte{0x5A});
        CHECK(crcs[j] == (with_crc ? modelzip::detail::crc32_of(b.span()) : 0xDEADBEEF));
        at += b.size() + 1;
      }
    }
  }
}

TEST_CASE("copy_threads_for: one thread for small copies, never more than the cores") {
  CHECK(copy_threads_for(0) == 1);
  CHECK(copy_threads_for(1 << 20) == 1);
  const unsigned many = copy_threads_for(std::uint64_t{1} << 34);
  CHECK(many >= 1);
  CHECK(many <= std::max(1u, std::thread::hardware_concurrency()));
  CHECK(many <= 8);
}

TEST_CASE("snapshot_tag records the CRC-32 of every copied buffer under the copy's range") {
  std::mt19937_64 rng(11);
  const Bytes big = testing::random_bytes(rng, (9u << 20) + 3);
  const Bytes small = testing::random_bytes(rng, 100);
  NewTag tag;
  tag.add("big", Tensor::dense(DType::uint8, {static_cast<std::int64_t>(big.size())}, big));
  tag.add("small", Tensor::dense(DType::uint8, {static_cast<std::int64_t>(small.size())}, small));
  tag.add("empty", Tensor::dense(DType::uint8, {0}, Bytes()));
  auto staging = std::make_shared<StagingBuffer>(snapshot_size(tag));
  modelzip::zip::KnownCrcs crcs;
  const NewTag copy = snapshot_tag(tag, staging, 2, &crcs);
  CHECK(crcs.size() == 2);  // the empty buffer has nothing to record
  const Bytes& staged_big = NewTag::Contents::of(copy).params.at(0).tensor.values();
  const Bytes& staged_small = NewTag::Contents::of(copy).params.at(1).tensor.values();
  CHECK(staged_big.data() != big.data());
  CHECK(crcs.find(staged_big.span()) == modelzip::detail::crc32_of(big.span()));
  CHECK(crcs.find(staged_small.span()) == modelzip::detail::crc32_of(small.span()));
  CHECK_FALSE(crcs.find(big.span()));                    // the original is not the copy
  CHECK_FALSE(crcs.find(staged_big.span().subspan(1)));  // whole ranges only
}

TEST_CASE("A lease that keeps nothing returns a borrowed idle buffer to the pool, frees its own") {
  StagingPool& pool = StagingPool::instance();
  pool.drop_idle();
  constexpr std::size_t MiB = std::size_t{1} << 20;
  // An idle 8 MiB buffer, as a background save that keeps its staging leaves it.
  pool.offer(std::make_shared<StagingBuffer>(8 * MiB));
  const std::byte* idle_bytes = nullptr;
  {
    StagingLease borrowing(1 * MiB, /*keep=*/false);
    CHECK(borrowing.capacity() == 8 * MiB);  // the idle buffer, not a new one
    idle_bytes = borrowing.data();
  }
  {
    bool was_idle = false;
    auto again = pool.take(1 * MiB, &was_idle);
    CHECK(was_idle);
    CHECK(again->capacity() == 8 * MiB);
    CHECK(again->data() == idle_bytes);
    pool.offer(std::move(again));
  }
  // A lease too large for the idle buffer allocates its own (freeing the
  // idle one, as take() does) and frees it at the end: nothing stays idle.
  {
    StagingLease own(12 * MiB, /*keep=*/false);
    CHECK(own.capacity() == 12 * MiB);
  }
  bool was_idle = true;
  auto fresh = pool.take(1 * MiB, &was_idle);
  CHECK_FALSE(was_idle);
  CHECK(fresh->capacity() == 2 * MiB);
  // With keep, a lease's own buffer stays idle for the next save.
  pool.drop_idle();
  { StagingLease kept(4 * MiB, /*keep=*/true); }
  auto reused = pool.take(1 * MiB, &was_idle);
  CHECK(was_idle);
  CHECK(reused->capacity() == 4 * MiB);
  pool.drop_idle();
}
