// modelzip::zip::CrcQueue: slot results equal zlib's CRC-32 of each slot's
// concatenation whatever the split; the queue keeps queued bytes alive;
// it can be reused after finish(), and destroyed with work pending it
// releases everything.
#include <doctest/doctest.h>
#include <zlib.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "zip/crc_queue.hpp"

using namespace modelzip;

namespace {

std::string pattern(std::size_t n, int seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 31 + seed + i / 7) & 0xFF);
  return s;
}

std::uint32_t zlib_crc(const std::string& s) {
  return static_cast<std::uint32_t>(
      ::crc32(0, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(s.size())));
}

}  // namespace

TEST_CASE("Each slot's CRC is that of its ranges in queuing order") {
  zip::CrcQueue q;
  std::vector<std::string> expected;
  for (int round = 0; round < 2; ++round) {  // the second round reuses the queue
    expected.clear();
    for (int slot = 0; slot < 40; ++slot) {
      const std::size_t n = static_cast<std::size_t>(slot * slot * 997 + round);
      const std::string whole = pattern(n, slot);
      REQUIRE(q.new_slot() == static_cast<std::size_t>(slot));
      // Split into uneven ranges, empty ones included; the caller's Bytes
      // are temporaries: the queue must keep its own copies.
      for (std::size_t off = 0, k = 1; off <= n; off += k, k = k * 3 + 1) {
        const std::size_t len = std::min(k, n - off);
        q.push(static_cast<std::size_t>(slot),
               Bytes::copy_of(std::string_view(whole).substr(off, len)));
        if (len == 0) break;
      }
      expected.push_back(whole);
    }
    const std::vector<std::uint32_t> crcs = q.finish();
    REQUIRE(crcs.size() == expected.size());
    for (std::size_t i = 0; i < crcs.size(); ++i) {
      INFO("round " << round << " slot " << i);
      CHECK(crcs[i] == zlib_crc(expected[i]));
    }
  }
}

TEST_CASE("A slot's result is ready as soon as its ranges are queued, finish() still has it") {
  zip::CrcQueue q;
  for (int round = 0; round < 2; ++round) {
    std::vector<std::uint32_t> early;
    std::vector<std::string> expected;
    for (int slot = 0; slot < 12; ++slot) {
      const std::string whole = pattern(static_cast<std::size_t>(slot) * 300'001 + 7, slot + round);
      REQUIRE(q.new_slot() == static_cast<std::size_t>(slot));
      for (std::size_t off = 0; off < whole.size(); off += 65'536)
        q.push(static_cast<std::size_t>(slot),
               Bytes::copy_of(std::string_view(whole).substr(off, 65'536)));
      // Asked at once, before the worker can have caught up.
      early.push_back(q.result(static_cast<std::size_t>(slot)));
      CHECK(early.back() == zlib_crc(whole));
      expected.push_back(whole);
    }
    const std::size_t empty = q.new_slot();
    CHECK(q.result(empty) == 0u);
    const auto crcs = q.finish();
    REQUIRE(crcs.size() == expected.size() + 1);
    for (std::size_t i = 0; i < expected.size(); ++i) CHECK(crcs[i] == early[i]);
  }
}

TEST_CASE("A slot without bytes has CRC 0; an unused queue finishes empty") {
  zip::CrcQueue q;
  CHECK(q.finish().empty());
  q.new_slot();
  const std::size_t b = q.new_slot();
  q.push(b, Bytes::copy_of(std::string("123456789")));
  const auto crcs = q.finish();
  REQUIRE(crcs.size() == 2);
  CHECK(crcs[0] == 0u);
  CHECK(crcs[1] == 0xCBF43926u);
}

TEST_CASE("Queued bytes are held until finish() or destruction, then released") {
  const std::string data = pattern(1 << 20, 3);
  auto keeper = std::make_shared<int>(0);
  auto borrowed = [&](std::size_t off) {
    return Bytes::borrow(std::as_bytes(std::span(data.data() + off, 1u << 16)), keeper);
  };
  {
    zip::CrcQueue q;
    const std::size_t s = q.new_slot();
    for (std::size_t k = 0; k < 16; ++k) q.push(s, borrowed(k << 16));
    CHECK(keeper.use_count() == 17);  // ours + one per queued range
    CHECK(q.finish() == std::vector<std::uint32_t>{zlib_crc(data)});
    CHECK(keeper.use_count() == 1);
  }
  // Destroyed with work pending (what a writer that throws mid-entry does):
  // the worker stops after its current range and every range is released.
  for (int round = 0; round < 20; ++round) {
    {
      zip::CrcQueue q;
      const std::size_t s = q.new_slot();
      for (std::size_t k = 0; k < 16; ++k) q.push(s, borrowed(k << 16));
    }
    REQUIRE(keeper.use_count() == 1);
  }
}

TEST_CASE("Ranges queued faster than one worker checksums start more workers, up to the cap") {
  const std::string whole = pattern(48u << 20, 5);
  for (std::size_t cap : {1u, 3u}) {
    INFO("cap " << cap);
    zip::CrcQueue q(cap);
    const std::size_t s = q.new_slot();
    // 48 ranges of 1 MiB queued at once: one worker cannot keep up.
    for (std::size_t off = 0; off < whole.size(); off += 1u << 20)
      q.push(s, Bytes::borrow(std::as_bytes(std::span(whole.data() + off, 1u << 20)), nullptr));
    CHECK(q.workers_started() == cap);
    CHECK(q.result(s) == zlib_crc(whole));
    CHECK(q.finish() == std::vector<std::uint32_t>{zlib_crc(whole)});
    CHECK(q.workers_started() == 0);
  }
  CHECK(zip::CrcQueue::default_workers() >= 1);
  CHECK(zip::CrcQueue::default_workers() <= 8);
}

TEST_CASE("forget() drops queued ranges and slots, keeps the workers, and the queue goes on") {
  const std::string data = pattern(8u << 20, 9);
  auto keeper = std::make_shared<int>(0);
  zip::CrcQueue q(2);
  for (int round = 0; round < 3; ++round) {
    const std::size_t s = q.new_slot();
    CHECK(s == 0u);
    for (std::size_t off = 0; off < data.size(); off += 1u << 18)
      q.push(s, Bytes::borrow(std::as_bytes(std::span(data.data() + off, 1u << 18)), keeper));
    if (round != 1) CHECK(q.result(s) == zlib_crc(data));
    q.forget();  // round 1: with ranges still unstarted
    CHECK(keeper.use_count() == 1);
    CHECK(q.workers_started() >= 1);
  }
  CHECK(q.finish().empty());
}
