// Content dedup of the Writer: a new tag's tensor equal to its namesake in
// the previous tag is stored once (checked byte by byte, never on a hash
// alone), a same-size tensor that differs anywhere is not, and tensors equal
// to a blob under another name or deflated in the old archive are still
// found by content.
#include <doctest/doctest.h>

#include <filesystem>
#include <map>

#include "model_builder.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/writer.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

Tensor floats(std::mt19937_64& rng, std::int64_t n) {
  return Tensor::dense(DType::float32, {n}, random_bytes(rng, static_cast<std::size_t>(n) * 4));
}

// `t` with byte `at` of its values changed.
Tensor poked(const Tensor& t, std::size_t at) {
  std::vector<std::byte> v(t.values().data(), t.values().data() + t.values().size());
  v[at] ^= std::byte{0x01};
  return Tensor::dense(t.dtype(), t.shape(), Bytes::take(std::move(v)));
}

std::map<std::string, ParamInfo> params_by_name(const Archive& a, const std::string& tag) {
  std::map<std::string, ParamInfo> out;
  for (const auto& p : a.params(tag)) out.emplace(p.name, p);
  return out;
}

}  // namespace

TEST_CASE("A tensor equal to its namesake in the previous tag is shared; one byte apart is not") {
  TempDir dir;
  const auto path = dir / "m.zip";
  std::mt19937_64 rng(11);
  const Tensor same = floats(rng, 100000), changed = floats(rng, 100000),
               resized = floats(rng, 1000), renamed = floats(rng, 5000);
  const std::size_t last = changed.values().size() - 1;
  {
    Writer w = Writer::open(path);
    NewTag t;
    t.add("same", same);
    t.add("first-byte", changed);
    t.add("last-byte", changed);
    t.add("resized", resized);
    t.add("old-name", renamed);
    w.add_tag("v1", std::move(t));
    w.commit();
  }
  const Tensor first_poked = poked(changed, 0), last_poked = poked(changed, last);
  const Tensor grown = floats(rng, 1001);
  {
    Writer w = Writer::open(path);
    NewTag t;
    t.add("same", same.to_owned());         // namesake, equal
    t.add("first-byte", first_poked);       // namesake, same size, differs at byte 0
    t.add("last-byte", last_poked);         // namesake, same size, differs at the last byte
    t.add("resized", grown);                // namesake of another size
    t.add("new-name", renamed.to_owned());  // equal to a blob under another name
    w.add_tag("v2", std::move(t));
    w.commit();
    CHECK(w.last_stats().blobs_deduplicated == 2);
    CHECK(w.last_stats().blobs_written == 3);
  }
  Archive a = Archive::open(path);
  auto v2 = params_by_name(a, "v2");
  CHECK(v2.at("same").owner_tag == "v1");
  CHECK(v2.at("new-name").owner_tag == "v1");
  for (const char* own : {"first-byte", "last-byte", "resized"})
    CHECK(v2.at(own).owner_tag == "v2");
  CHECK(a.tensor("same", "v2") == same);
  CHECK(a.tensor("first-byte", "v2") == first_poked);
  CHECK(a.tensor("last-byte", "v2") == last_poked);
  CHECK(a.tensor("resized", "v2") == grown);
  CHECK(a.tensor("new-name", "v2") == renamed);
  CHECK(a.verify().empty());
}

TEST_CASE("A namesake that is itself shared leads to the tag that holds the blob") {
  TempDir dir;
  const auto path = dir / "m.zip";
  std::mt19937_64 rng(12);
  const Tensor w0 = floats(rng, 20000);
  for (int k = 1; k <= 3; ++k) {
    Writer w = Writer::open(path);
    NewTag t;
    t.add("w", w0.to_owned());
    t.add("step", floats(rng, 10));
    w.add_tag("v" + std::to_string(k), std::move(t));
    w.commit();
    CHECK(w.last_stats().blobs_deduplicated == (k == 1 ? 0 : 1));
  }
  Archive a = Archive::open(path);
  for (const char* tag : {"v2", "v3"}) {
    INFO(tag);
    CHECK(params_by_name(a, tag).at("w").owner_tag == "v1");
    CHECK(a.tensor("w", tag) == w0);
  }
  CHECK(a.verify().empty());
}

TEST_CASE("Deflated blobs of the old archive are still found by content") {
  TempDir dir;
  const auto path = dir / "m.zip";
  const Tensor zeros =
      Tensor::dense(DType::float32, {50000}, Bytes::take(std::vector<std::byte>(200000)));
  {
    Writer w = Writer::open(path);
    NewTag t;
    t.add("z", zeros, ParamOptions{Compression::deflate});
    w.add_tag("v1", std::move(t));
    w.commit();
  }
  {
    Writer w = Writer::open(path);
    NewTag t;
    t.add("z", zeros.to_owned(), ParamOptions{Compression::deflate});
    w.add_tag("v2", std::move(t));
    w.commit();
    CHECK(w.last_stats().blobs_deduplicated == 1);
  }
  Archive a = Archive::open(path);
  CHECK(params_by_name(a, "v2").at("z").owner_tag == "v1");
  CHECK(a.tensor("z", "v2") == zeros);
}

// Both directions, through the namesake path (same name as in the previous
// tag) and through the CRC index (another name): equal bytes under another
// compression are stored anew, so the parameter keeps the storage it asked
// for (stored: zero-copy views into the file).
TEST_CASE("Dedup never changes a parameter's compression") {
  TempDir dir;
  const auto path = dir / "m.zip";
  std::mt19937_64 rng(21);
  const Tensor w0 = floats(rng, 20000);
  for (Compression first : {Compression::store, Compression::deflate}) {
    const Compression other =
        first == Compression::store ? Compression::deflate : Compression::store;
    const std::string base = first == Compression::store ? "s" : "d";
    std::filesystem::remove(path);
    {
      Writer w = Writer::open(path);
      NewTag t;
      t.add("w", w0, ParamOptions{first});
      w.add_tag(base + "1", std::move(t));
      w.commit();
    }
    Writer w = Writer::open(path);
    NewTag t;
    t.add("w", w0.to_owned(), ParamOptions{other});       // namesake, other compression
    t.add("w_copy", w0.to_owned(), ParamOptions{other});  // found by CRC: shares "w"
    t.add("w_same", w0.to_owned(), ParamOptions{first});  // same compression: shared
    w.add_tag(base + "2", std::move(t));
    w.commit();
    CHECK(w.last_stats().blobs_written == 1);
    CHECK(w.last_stats().blobs_deduplicated == 2);
    Archive a = Archive::open(path);
    auto p = params_by_name(a, base + "2");
    CHECK_FALSE(p.at("w").shared);
    CHECK(p.at("w").compressed == (other == Compression::deflate));
    CHECK(p.at("w_copy").blob == p.at("w").blob);
    CHECK(p.at("w_same").owner_tag == base + "1");
    CHECK(p.at("w_same").compressed == (first == Compression::deflate));
    for (const char* name : {"w", "w_copy", "w_same"}) CHECK(a.tensor(name, base + "2") == w0);
    if (other == Compression::store) {  // the re-stored copy is a view into the file
      Tensor view = a.tensor("w", base + "2", ReadMode::zero_copy);
      CHECK(view.values().is_mapped());
    }
  }
}

TEST_CASE("Two tags added in one commit: the second dedups against the first") {
  TempDir dir;
  const auto path = dir / "m.zip";
  std::mt19937_64 rng(13);
  const Tensor w0 = floats(rng, 30000);
  Writer w = Writer::open(path);
  for (const char* tag : {"a", "b"}) {
    NewTag t;
    t.add("w", w0.to_owned());
    w.add_tag(tag, std::move(t));
  }
  w.commit();
  CHECK(w.last_stats().blobs_written == 1);
  CHECK(w.last_stats().blobs_deduplicated == 1);
  Archive a = Archive::open(path);
  CHECK(params_by_name(a, "b").at("w").owner_tag == "a");
  CHECK(a.tensor("w", "b") == w0);
}

TEST_CASE(
    "Large blobs: dedup's CRC-32s (spread over threads) find copies; the archive is the same") {
  // Blobs of several MiB are checksummed in ranges by the CRC workers before
  // the write, and written with that CRC; without dedup the writer computes
  // it while writing. Both must give the same bytes, and a copy under
  // another name must be found through its CRC.
  TempDir dir;
  std::mt19937_64 rng(17);
  const std::vector<Tensor> distinct = {floats(rng, 3 << 20), floats(rng, (5 << 20) + 3),
                                        floats(rng, 1 << 19), floats(rng, 9 << 20)};
  auto save = [&](const std::filesystem::path& path, bool dedup, bool with_copy) {
    Writer w = Writer::open(path, WriterOptions{.dedup = dedup, .durable = false});
    NewTag t;
    for (std::size_t i = 0; i < distinct.size(); ++i) t.add("w" + std::to_string(i), distinct[i]);
    if (with_copy) t.add("copy", distinct[3].to_owned());
    w.add_tag("v1", std::move(t));
    w.commit();
    return w.last_stats();
  };
  save(dir / "dedup.zip", true, false);
  save(dir / "plain.zip", false, false);
  CHECK(io_bytes(dir / "dedup.zip") == io_bytes(dir / "plain.zip"));
  CHECK(Archive::open(dir / "dedup.zip").verify().empty());

  const Writer::Stats stats = save(dir / "copy.zip", true, true);
  CHECK(stats.blobs_deduplicated == 1);
  CHECK(stats.blobs_written == distinct.size());
  Archive a = Archive::open(dir / "copy.zip");
  CHECK(a.tensor("copy") == distinct[3]);
  CHECK(a.verify().empty());
}
