// tensor_data_range: the file range of a stored dense tensor's raw data, for
// readers that read() it. The range holds exactly the tensor's bytes, its CRC
// parts put together give the entry's CRC-32, and only entries a read of the
// file can serve have one (not deflated, empty or in-memory ones).
#include <doctest/doctest.h>

#include <optional>
#include <random>
#include <string>

#include "checkpoint/data_ranges.hpp"
#include "core/crc32.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/writer.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

std::optional<DataRange> range_of(const Archive& a, const std::string& name) {
  const Archive::Impl& impl = Archive::Impl::of(a);
  return tensor_data_range(impl, impl.entry_or_throw(a.param(name).blob));
}

}  // namespace

TEST_CASE("Data ranges locate stored dense tensors in the file") {
  TempDir dir;
  const auto path = dir / "m.zip";
  std::mt19937_64 rng(11);
  const Tensor dense = Tensor::dense(DType::float32, {3, 333}, random_bytes(rng, 3 * 333 * 4));
  {
    Writer w = Writer::open(path, {.durable = false});
    NewTag t;
    t.add("dense", dense);
    t.add("packed", Tensor::dense(DType::float32, {1000}, random_bytes(rng, 4000)),
          {Compression::deflate});
    t.add("empty", Tensor::dense(DType::float32, {0}, Bytes()));
    w.add_tag("v1", std::move(t));
    w.commit();
  }
  const std::string file = io_bytes(path);
  const Archive a = Archive::open(path);

  const std::optional<DataRange> r = range_of(a, "dense");
  REQUIRE(r.has_value());
  REQUIRE(r->nbytes == dense.values().size());
  REQUIRE(r->offset + r->nbytes <= file.size());
  CHECK(file.compare(r->offset, r->nbytes, reinterpret_cast<const char*>(dense.values().data()),
                     dense.values().size()) == 0);
  const std::uint32_t data_crc = modelzip::detail::crc32_of(dense.values().span());
  const std::uint32_t whole = modelzip::detail::crc32_concat(
      modelzip::detail::crc32_concat(r->crc_before, data_crc, r->nbytes), r->crc_after,
      r->after_bytes);
  CHECK(whole == r->entry_crc);
  CHECK(whole != modelzip::detail::crc32_concat(
                     modelzip::detail::crc32_concat(r->crc_before, data_crc ^ 1, r->nbytes),
                     r->crc_after, r->after_bytes));

  CHECK_FALSE(range_of(a, "packed").has_value());  // deflated: not the raw bytes
  CHECK_FALSE(range_of(a, "empty").has_value());   // nothing to read

  const Archive in_memory =
      Archive::from_memory(Bytes::copy_of(std::as_bytes(std::span(file.data(), file.size()))));
  CHECK_FALSE(range_of(in_memory, "dense").has_value());  // no file to read
}
