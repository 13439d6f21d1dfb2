// modelzip::zip CRC-32: the standard check value, and agreement with zlib's
// own crc32() (the independent reference) for every length and alignment
// around the folding code's 16- and 64-byte block boundaries, and around the
// 256-byte steps of the 512-bit loop (taken from 1 KiB on where the CPU has
// VPCLMULQDQ; elsewhere these lengths check the 128-bit loop again).
#include <doctest/doctest.h>
#include <zlib.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/crc32.hpp"

using namespace modelzip;

namespace {

std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 7 + i / 13) & 0xFF);
  return s;
}

std::span<const std::byte> view(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

std::uint32_t zlib_crc(std::uint32_t crc, std::string_view s) {
  return static_cast<std::uint32_t>(
      ::crc32(crc, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(s.size())));
}

}  // namespace

TEST_CASE("crc32_of matches the CRC-32 check value; crc32_concat combines") {
  CHECK(detail::crc32_of(view("123456789")) == 0xCBF43926u);  // the standard check value
  CHECK(detail::crc32_of({}) == 0u);
  std::string a = pattern(1000), b = pattern(777);
  CHECK(detail::crc32_concat(detail::crc32_of(view(a)), detail::crc32_of(view(b)), b.size()) ==
        detail::crc32_of(view(a + b)));
  CHECK(detail::crc32_concat(detail::crc32_of(view(a)), 0, 0) == detail::crc32_of(view(a)));
}

TEST_CASE("crc32_of and crc32_update agree with zlib at every length and alignment") {
  const std::string data = pattern(1200);
  for (std::size_t offset = 0; offset < 17; ++offset)
    for (std::size_t length = 0; offset + length <= data.size(); length += length < 300 ? 1 : 37) {
      std::string_view s = std::string_view(data).substr(offset, length);
      INFO("offset " << offset << " length " << length);
      REQUIRE(detail::crc32_of(view(s)) == zlib_crc(0, s));
    }
  // Continuing from a previous CRC, split at every point of a 200-byte run.
  const std::string_view run = std::string_view(data).substr(3, 200);
  for (std::size_t cut = 0; cut <= run.size(); ++cut) {
    std::uint32_t crc = detail::crc32_update(0, view(run.substr(0, cut)));
    crc = detail::crc32_update(crc, view(run.substr(cut)));
    REQUIRE(crc == zlib_crc(0, run));
  }
}

TEST_CASE("crc32_of agrees with zlib for long runs at every 256-byte step and alignment") {
  const std::string data = pattern(70000);
  for (std::size_t offset : {0, 1, 7, 16, 63, 64, 100}) {
    // Every length from just below the 1 KiB switch to past the tenth step.
    for (std::size_t length = 1000; length <= 3900; ++length) {
      std::string_view s = std::string_view(data).substr(offset, length);
      INFO("offset " << offset << " length " << length);
      REQUIRE(detail::crc32_of(view(s)) == zlib_crc(0, s));
    }
    for (std::size_t length : {16384, 65535, 65536, 69000}) {
      std::string_view s = std::string_view(data).substr(offset, length);
      INFO("offset " << offset << " length " << length);
      REQUIRE(detail::crc32_of(view(s)) == zlib_crc(0, s));
    }
  }
  // Continuing from a CRC that is not 0, as in chunked writes.
  const std::string_view head = std::string_view(data).substr(0, 777);
  const std::string_view rest = std::string_view(data).substr(777, 50000);
  CHECK(detail::crc32_update(detail::crc32_of(view(head)), view(rest)) ==
        zlib_crc(zlib_crc(0, head), rest));
}

TEST_CASE("SparseCrc32: holders of disjoint pieces give the CRC-32 of the whole run") {
  const std::string data = pattern(300000);
  const std::string_view all(data);
  const std::uint32_t expected = zlib_crc(0, all);
  SUBCASE("strided pieces of 1 KiB, three holders in turn (a column-sharded tensor)") {
    std::vector<detail::SparseCrc32> holders(3, detail::SparseCrc32(data.size()));
    std::size_t i = 0;
    for (std::size_t at = 0; at < data.size(); at += 1024, ++i) {
      const std::size_t n = std::min<std::size_t>(1024, data.size() - at);
      REQUIRE(holders[i % 3].add(at, n, zlib_crc(0, all.substr(at, n))));
    }
    std::uint32_t xored = 0;
    std::uint64_t covered = 0;
    for (const auto& h : holders) {
      xored ^= h.value();
      covered += h.covered();
    }
    CHECK(covered == data.size());
    CHECK(detail::SparseCrc32::crc_of_run(data.size(), xored) == expected);
  }
  SUBCASE("uneven pieces, an empty one, a holder with nothing, a holder with everything") {
    const std::vector<std::size_t> cuts = {0, 1, 17, 17, 4096, 100000, 100001, 250000, 300000};
    std::vector<detail::SparseCrc32> holders(4, detail::SparseCrc32(data.size()));
    for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
      const std::size_t at = cuts[k], n = cuts[k + 1] - cuts[k];
      REQUIRE(holders[(k * 5) % 3].add(at, n, zlib_crc(0, all.substr(at, n))));
    }
    std::uint32_t xored = 0;
    for (const auto& h : holders) xored ^= h.value();  // holders[3] wrote nothing
    CHECK(detail::SparseCrc32::crc_of_run(data.size(), xored) == expected);
    detail::SparseCrc32 one(data.size());
    REQUIRE(one.add(0, data.size(), expected));
    CHECK(detail::SparseCrc32::crc_of_run(data.size(), one.value()) == expected);
  }
  SUBCASE("a wrong piece CRC changes the result") {
    detail::SparseCrc32 h(data.size());
    REQUIRE(h.add(0, 1000, zlib_crc(0, all.substr(0, 1000)) ^ 1));
    REQUIRE(h.add(1000, data.size() - 1000, zlib_crc(0, all.substr(1000))));
    CHECK(detail::SparseCrc32::crc_of_run(data.size(), h.value()) != expected);
  }
  SUBCASE("pieces out of order, overlapping or beyond the run are refused") {
    detail::SparseCrc32 h(1000);
    REQUIRE(h.add(100, 100, 0));
    CHECK_FALSE(h.add(150, 10, 0));   // overlaps
    CHECK_FALSE(h.add(50, 10, 0));    // before the last piece
    CHECK_FALSE(h.add(900, 101, 0));  // ends beyond the run
    CHECK_FALSE(h.add(1001, 0, 0));
    CHECK(h.covered() == 100);
    CHECK(h.add(1000, 0, 0));  // an empty piece at the end
  }
}
