// ReadMode::private_view: writable memory that is the reader's alone, viewing
// a private copy-on-write mapping of the archive file. Writes reach neither
// the file, nor the archive's own views, nor another load, nor a parameter
// that deduplication stored in the same blob; deflated blobs are copies;
// check_crc finds a damaged blob before any tensor is returned.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "modelzip/archive.hpp"
#include "modelzip/error.hpp"
#include "modelzip/writer.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

// Writes through a private view: the memory is the caller's (the type is const as for every Bytes).
void fill(const Tensor& t, unsigned char value) {
  std::memset(const_cast<std::byte*>(t.values().data()), value, t.values().size());
}

bool all_bytes(const Tensor& t, unsigned char value) {
  for (std::byte b : t.values().span())
    if (b != std::byte{value}) return false;
  return true;
}

Tensor bytes_tensor(std::int64_t n, unsigned char value) {
  return Tensor::dense(DType::uint8, {n},
                       Bytes::copy_of(std::string(static_cast<std::size_t>(n), char(value))));
}

}  // namespace

TEST_CASE("Private views are writable, and writes stay in the view") {
  TempDir dir;
  const auto path = dir / "m.zip";
  std::mt19937_64 rng(5);
  {
    Writer w = Writer::open(path, {.durable = false});
    NewTag t;
    t.add("big", bytes_tensor(1 << 20, 7));  // one blob for both names
    t.add("big-twin", bytes_tensor(1 << 20, 7));
    t.add("small", bytes_tensor(100, 9));
    t.add("small-twin", bytes_tensor(100, 9));
    t.add("packed", Tensor::dense(DType::float32, {1000}, random_bytes(rng, 4000)),
          {Compression::deflate});
    w.add_tag("v1", std::move(t));
    w.commit();
  }
  const std::string before = io_bytes(path);
  std::optional<Archive> archive = Archive::open(path);
  const Archive& a = *archive;
  CHECK(a.param("big").blob == a.param("big-twin").blob);
  CHECK(a.param("small").blob == a.param("small-twin").blob);
  const Tensor shared_view = a.tensor("big");

  auto first = a.load("v1", {.mode = ReadMode::private_view});
  REQUIRE(first.size() == 5);
  for (const auto& [name, t] : first) {
    // Copies: the deflated blob, and the second name of a blob under 64 KiB.
    CHECK(t.values().is_mapped() == (name != "packed" && name != "small-twin"));
    fill(t, 1);
  }
  SUBCASE("no other parameter, load, view or the file sees the writes") {
    CHECK(all_bytes(shared_view, 7));
    auto second = a.load("v1", {.mode = ReadMode::private_view});
    CHECK(all_bytes(second.at("big"), 7));
    CHECK(all_bytes(second.at("big-twin"), 7));
    CHECK(all_bytes(second.at("small-twin"), 9));
    fill(second.at("big"), 3);
    CHECK(all_bytes(second.at("big-twin"), 7));
    CHECK(all_bytes(a.tensor("small", "v1", ReadMode::private_view), 9));
    CHECK(io_bytes(path) == before);
  }
  SUBCASE("the views outlive the archive") {
    archive.reset();
    CHECK(all_bytes(first.at("big"), 1));
  }
}

TEST_CASE("load reads the names asked for, and checks CRCs when asked") {
  TempDir dir;
  const auto path = dir / "m.zip";
  {
    Writer w = Writer::open(path, {.durable = false});
    NewTag t;
    t.add("a", bytes_tensor(5000, 1));
    t.add("b", bytes_tensor(5000, 2));
    w.add_tag("v1", std::move(t));
    w.commit();
  }
  const std::vector<std::string> only_b{"b"};
  for (ReadMode mode : {ReadMode::zero_copy, ReadMode::private_view, ReadMode::copy}) {
    auto got = Archive::open(path).load("v1", {.names = only_b, .mode = mode});
    CHECK(got.size() == 1);
    CHECK(all_bytes(got.at("b"), 2));
  }
  const std::vector<std::string> missing{"a", "nope"};
  CHECK_THROWS_AS(Archive::open(path).load("v1", {.names = missing}), Error);

  // The last byte of the file before the central directory is a's or b's data: damage it.
  std::string data = io_bytes(path);
  const std::string needle(5000, '\2');
  const auto at = data.find(needle);
  REQUIRE(at != std::string::npos);
  data[at + 10] = '\x7f';
  write_file(path, data);
  Archive damaged = Archive::open(path);
  CHECK_FALSE(
      all_bytes(damaged.load("v1", {.names = only_b, .mode = ReadMode::private_view}).at("b"), 2));
  // Every mode and selection that views the data checks it when asked (the
  // name chosen, or every tensor parameter).
  const std::vector<std::optional<std::vector<std::string>>> selections{only_b, std::nullopt};
  for (ReadMode mode : {ReadMode::zero_copy, ReadMode::private_view}) {
    for (const auto& names : selections) {
      try {
        damaged.load("v1", {.names = names, .mode = mode, .verify_crc = true});
        FAIL("no error for a damaged blob");
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::corrupt);
        CHECK(std::string(e.what()).find("CRC-32 mismatch") != std::string::npos);
        CHECK(e.context().entry == damaged.param("b").blob);
      }
    }
  }
  CHECK_NOTHROW(damaged.load("v1"));  // views are not checked unless asked
}
