#include <doctest/doctest.h>

#include <cstring>
#include <thread>

#include "checkpoint/staging_area.hpp"
#include "test_support.hpp"

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
    std::memset(staging.data(), 0x5A, total);
    std::vector<CopyJob> jobs;
    std::size_t at = 0;
    for (const Bytes& b : sources) {
      jobs.push_back({b.data(), staging.data() + at, b.size()});
      at += b.size() + 1;
    }
    parallel_copy(jobs, threads);
    at = 0;
    for (const Bytes& b : sources) {
      if (!b.empty()) CHECK(std::memcmp(staging.data() + at, b.data(), b.size()) == 0);
      CHECK(staging.data()[at + b.size()] == std::byte{0x5A});
      at += b.size() + 1;
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
