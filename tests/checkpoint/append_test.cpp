// The append path: a commit that only adds tags writes the new entries and a
// new central directory after the old end, crash-safely (append journal).
#include <doctest/doctest.h>

#include <filesystem>

#include "checkpoint/archive_impl.hpp"
#include "io/append_journal.hpp"
#include "model_builder.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/writer.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;
namespace fs = std::filesystem;

namespace {

NewTag tag_with(const Tensor& t, const std::string& name = "w") {
  NewTag nt;
  nt.add(name, t);
  return nt;
}

void add(const fs::path& path, const std::string& tag, NewTag nt, WriterOptions o = {}) {
  Writer w = Writer::open(path, std::move(o));
  w.add_tag(tag, std::move(nt));
  w.commit();
}

}  // namespace

TEST_CASE("Adding a tag appends only the new data and keeps the old bytes in place") {
  TempDir dir;
  auto path = dir / "m.zip";
  std::mt19937_64 rng(3);
  Tensor big = Tensor::dense(DType::uint8, {4 << 20}, random_bytes(rng, 4 << 20));
  add(path, "v1", tag_with(big));
  const std::string before = io_bytes(path);
  Tensor small = Tensor::dense(DType::uint8, {1000}, random_bytes(rng, 1000));
  Writer w = Writer::open(path);
  NewTag nt;
  nt.share("w", "v1", "w");
  nt.add("b", small);
  w.add_tag("v2", std::move(nt));
  w.commit();
  CHECK(w.last_stats().appended);
  CHECK(w.last_stats().bytes_written < 8192);  // not the 4 MiB tensor again
  const std::string after = io_bytes(path);
  REQUIRE(after.size() > before.size());
  CHECK(after.compare(0, before.size(), before) == 0);  // the old archive is a prefix
  Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"v1", "v2"});
  CHECK(a.tensor("w", "v2") == big);
  CHECK(a.tensor("b") == small);
  CHECK(reinterpret_cast<std::uintptr_t>(a.tensor("b").values().data()) % 64 == 0);
  CHECK(a.verify().empty());
  CHECK_FALSE(fs::exists(io::append_journal_path(path)));
}

TEST_CASE("Many appends stay valid and compaction bounds the dead bytes") {
  TempDir dir;
  auto path = dir / "m.zip";
  std::mt19937_64 rng(11);
  int appended = 0, rewritten = 0;
  std::vector<Tensor> saved;
  for (int i = 0; i < 40; ++i) {
    Tensor t = random_tensor(rng, DType::float32);
    saved.push_back(t);
    Writer w = Writer::open(path);
    w.add_tag("t" + std::to_string(i), tag_with(t));
    w.commit();
    (w.last_stats().appended ? appended : rewritten)++;
    // Dead bytes never exceed half of the file.
    Archive a = Archive::open(path);
    std::uint64_t live = a.internals().directory.central_directory_size + 22;
    for (const auto& e : a.internals().directory.entries)
      live += e.data_offset - e.local_header_offset + e.compressed_size;
    CHECK(live * 2 >= fs::file_size(path));
  }
  CHECK(appended > 10);
  CHECK(rewritten > 1);  // the first commit and the compactions
  Archive a = Archive::open(path);
  for (int i = 0; i < 40; ++i) CHECK(a.tensor("w", "t" + std::to_string(i)) == saved[i]);
  CHECK(a.verify().empty());
}

TEST_CASE("Removing a tag or changing metadata rewrites instead of appending") {
  TempDir dir;
  auto path = dir / "m.zip";
  Tensor t = Tensor::dense(DType::int8, {3}, Bytes::copy_of(std::string("abc")));
  add(path, "a", tag_with(t));
  add(path, "b", tag_with(t, "x"));
  Writer w = Writer::open(path);
  w.remove_tag("a");
  w.commit();
  CHECK_FALSE(w.last_stats().appended);
  Writer w2 = Writer::open(path, WriterOptions{.append = false});
  w2.add_tag("c", tag_with(t));
  w2.commit();
  CHECK_FALSE(w2.last_stats().appended);
}

TEST_CASE("An interrupted append: readers see the previous archive, the next writer cuts it back") {
  TempDir dir;
  auto path = dir / "m.zip";
  Tensor t = Tensor::dense(DType::int8, {3}, Bytes::copy_of(std::string("abc")));
  add(path, "v1", tag_with(t));
  const std::string old = io_bytes(path);
  // What a writer killed in the middle of an append leaves: the journal and
  // a partial tail (here: the start of a local header and some data).
  io::write_append_journal(path, old.size());
  write_file(path, old + std::string("PK\x03\x04", 4) + std::string(100000, 'x'));
  Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"v1"});
  CHECK(a.tensor("w") == t);
  CHECK(a.verify().empty());
  add(path, "v2", tag_with(t, "y"));  // recovery, then an append
  CHECK_FALSE(fs::exists(io::append_journal_path(path)));
  Archive b = Archive::open(path);
  CHECK(b.tags() == std::vector<std::string>{"v1", "v2"});
  CHECK(io_bytes(path).compare(0, old.size(), old) == 0);
  CHECK(b.verify().empty());
}

TEST_CASE("A finished append whose journal remained is kept") {
  TempDir dir;
  auto path = dir / "m.zip";
  Tensor t = Tensor::dense(DType::int8, {3}, Bytes::copy_of(std::string("abc")));
  add(path, "v1", tag_with(t));
  auto old_size = fs::file_size(path);
  add(path, "v2", tag_with(t, "z"));
  io::write_append_journal(path, old_size);  // as if killed just before removing it
  add(path, "v3", tag_with(t, "q"));
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"v1", "v2", "v3"});
}
