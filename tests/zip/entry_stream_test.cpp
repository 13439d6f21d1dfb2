// zip::stream_entry: the uncompressed bytes of stored and deflated entries in
// order, in pieces of at most kStreamChunk, with the size and CRC-32 checked
// after the last piece; damaged, truncated or lying entries are
// Error(corrupt) naming the entry.
#include <doctest/doctest.h>

#include <random>
#include <stdexcept>

#include "expect_error.hpp"
#include "zip/entry_stream.hpp"
#include "zip_builder.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

// An "archive" of 100 junk bytes, then `data`, then 100 more: the entry
// points at `data`.
struct Placed {
  Bytes file;
  zip::EntryInfo entry;
};

Placed place(const std::string& plain, bool deflate) {
  const std::string data = deflate ? deflate_raw(plain, 6) : plain;
  const std::string file = std::string(100, 'J') + data + std::string(100, 'K');
  Placed p{Bytes::copy_of(file), {}};
  p.entry.name = "t/params/0.fb";
  p.entry.method = deflate ? zip::kMethodDeflate : zip::kMethodStore;
  p.entry.crc32 = crc32_of(plain);
  p.entry.compressed_size = data.size();
  p.entry.uncompressed_size = plain.size();
  p.entry.data_offset = 100;
  return p;
}

struct Collected {
  std::string bytes;
  std::size_t pieces = 0, largest = 0;
};

Collected collect(const Placed& p) {
  Collected c;
  zip::stream_entry(p.file, p.entry, [&](std::span<const std::byte> piece) {
    c.bytes.append(reinterpret_cast<const char*>(piece.data()), piece.size());
    ++c.pieces;
    c.largest = std::max(c.largest, piece.size());
  });
  return c;
}

std::string sample(std::size_t n) {
  std::mt19937_64 rng(5);
  std::string s(n, '\0');
  // Compressible but not trivial: runs of random letters.
  for (std::size_t i = 0; i < n; i += 16) {
    const char c = static_cast<char>('a' + rng() % 26);
    for (std::size_t k = i; k < std::min(n, i + 16); ++k) s[k] = c;
  }
  return s;
}

}  // namespace

TEST_CASE("stream_entry: stored and deflated entries arrive whole, in bounded pieces") {
  const std::string plain = sample(2 * zip::kStreamChunk + 12345);
  for (bool deflate : {false, true}) {
    CAPTURE(deflate);
    Collected c = collect(place(plain, deflate));
    CHECK(c.bytes == plain);
    CHECK(c.pieces >= 3);
    CHECK(c.largest <= zip::kStreamChunk);
    Collected empty = collect(place("", deflate));
    CHECK(empty.bytes.empty());
  }
}

TEST_CASE(
    "stream_entry: damaged, truncated and lying entries are Error(corrupt) naming the entry") {
  const std::string plain = sample(300000);
  for (bool deflate : {false, true}) {
    CAPTURE(deflate);
    Placed p = place(plain, deflate);
    p.entry.crc32 ^= 1;
    std::size_t seen = 0;
    REQUIRE_ERROR_AS(
        err,
        zip::stream_entry(p.file, p.entry, [&](std::span<const std::byte> b) { seen += b.size(); }),
        ErrorCode::corrupt, "CRC-32 mismatch");
    CHECK(err.context().entry == "t/params/0.fb");
    CHECK(seen == plain.size());  // checked after the last piece

    p = place(plain, deflate);
    p.entry.uncompressed_size += 1;
    if (!deflate) p.entry.compressed_size += 1;
    REQUIRE_ERROR_AS(err2, collect(p), ErrorCode::corrupt, deflate ? "less data" : "");
    p = place(plain, deflate);
    p.entry.uncompressed_size -= 1;
    if (!deflate) p.entry.compressed_size -= 1;
    REQUIRE_ERROR_AS(err3, collect(p), ErrorCode::corrupt, deflate ? "more data" : "CRC-32");
    p = place(plain, deflate);
    p.entry.compressed_size = 1000000;  // beyond the end of the file
    REQUIRE_ERROR_AS(err4, collect(p), ErrorCode::corrupt, "beyond the end");
  }
  Placed p = place(plain, true);
  p.entry.compressed_size /= 2;  // the deflate stream is cut
  REQUIRE_ERROR_AS(err5, collect(p), ErrorCode::corrupt, "ends early");
  p = place(std::string(1000, 'x'), false);
  p.entry.method = zip::kMethodDeflate;
  p.entry.compressed_size = p.entry.uncompressed_size = 1000;  // not deflate data
  REQUIRE_ERROR_AS(err6, collect(p), ErrorCode::corrupt, "invalid deflate data");
  p.entry.method = 12;  // bzip2
  REQUIRE_ERROR_AS(err7, collect(p), ErrorCode::corrupt, "unsupported compression method");
}

TEST_CASE("stream_entry: an exception from the sink stops the stream") {
  Placed p = place(sample(3 * zip::kStreamChunk), true);
  int calls = 0;
  CHECK_THROWS_AS(zip::stream_entry(p.file, p.entry,
                                    [&](std::span<const std::byte>) {
                                      if (++calls == 2) throw std::runtime_error("disk full");
                                    }),
                  std::runtime_error);
  CHECK(calls == 2);
}
