// The append path: a commit that only adds tags overwrites the archive's
// tail (tags.txt, central directory, end records) with the new entries, a
// new tags.txt, directory and end records, crash-safely (append journal),
// so that no byte of the file is left unused.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>

#include "checkpoint/archive_impl.hpp"
#include "io/append_journal.hpp"
#include "io/file_identity.hpp"
#include "model_builder.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/writer.hpp"
#include "test_support.hpp"
#include "zip/archive_snapshot.hpp"
#include "zip_structure.hpp"

using namespace modelzip;
using namespace modelzip::testing;
namespace fs = std::filesystem;

namespace {

NewTag tag_with(const Tensor& t, const std::string& name = "w") {
  NewTag nt;
  nt.add(name, t);
  return nt;
}

// The small tensor most tests save: int8 "abc".
Tensor abc() {
  return Tensor::dense(DType::int8, {3}, Bytes::copy_of(std::string("abc")));
}

void add(const fs::path& path, const std::string& tag, NewTag nt, WriterOptions o = {}) {
  Writer w = Writer::open(path, std::move(o));
  w.add_tag(tag, std::move(nt));
  w.commit();
}

// Offset of the last local header ("PK\3\4" followed by tags.txt's name),
// found in the raw bytes, independently of the library's parser.
std::size_t tags_header_offset(const std::string& bytes) {
  std::size_t at = bytes.rfind("tags.txt");
  REQUIRE(at != std::string::npos);
  at = bytes.rfind(std::string("PK\x03\x04", 4), at);
  REQUIRE(at != std::string::npos);
  return at;
}

// Writes the append journal (id `id`) of an append to the archive whose bytes
// were `old`, tail from `tail` on, beside `beside` (the archive's path, or a
// link to it).
void write_journal_of(const fs::path& beside, std::uint64_t id, const std::string& old,
                      std::size_t tail, bool durable = true) {
  io::write_append_journal(
      beside, {id, tail, old.size(), Bytes::copy_of(std::string_view(old).substr(tail))}, durable);
}

// Bytes that belong to no local header + data, the central directory or the
// end record, computed from the central directory's own fields.
std::uint64_t unused(const fs::path& path) {
  Archive a = Archive::open(path);
  const auto& d = Archive::Impl::of(a).directory;
  std::uint64_t used = d.central_directory_size + 22 + d.comment.size();
  for (const auto& e : d.entries) used += e.data_offset - e.local_header_offset + e.compressed_size;
  return fs::file_size(path) - used;
}

}  // namespace

TEST_CASE("Adding a tag overwrites only the tail and keeps every entry's bytes in place") {
  TempDir dir;
  auto path = dir / "m.zip";
  std::mt19937_64 rng(3);
  Tensor big = Tensor::dense(DType::uint8, {4 << 20}, random_bytes(rng, 4 << 20));
  add(path, "v1", tag_with(big));
  const std::string before = io_bytes(path);
  const std::size_t tail = tags_header_offset(before);
  Archive old = Archive::open(path);
  Tensor old_view = old.tensor("w");
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
  CHECK(after.compare(0, tail, before, 0, tail) == 0);  // everything before the tail stays
  CHECK(tags_header_offset(after) > tail);              // tags.txt is last again
  CHECK(unused(path) == 0);
  Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"v1", "v2"});
  CHECK(a.tensor("w", "v2") == big);
  CHECK(a.tensor("b") == small);
  CHECK(reinterpret_cast<std::uintptr_t>(a.tensor("b").values().data()) % 64 == 0);
  CHECK(a.verify().empty());
  CHECK_FALSE(fs::exists(io::append_journal_path(path)));
  // The archive opened before the append still sees its own version, whole:
  // its tail is a private copy, its views point into the unchanged prefix.
  CHECK(old.tags() == std::vector<std::string>{"v1"});
  CHECK(old.entry("tags.txt").as_string_view() == "v1\n");
  CHECK(old.verify().empty());
  CHECK(old_view == big);
}

TEST_CASE("New saves and appends, durable or not: structure checked independently of the writer") {
  // Local headers equal central records, stored data 64-byte aligned, CRCs
  // equal zlib's, unzip and Python's zipfile accept: for a new archive and
  // after appends, with direct writes of large entries (durable) and without.
  for (bool durable : {true, false}) {
    INFO("durable " << durable);
    TempDir dir;
    auto path = dir / "m.zip";
    std::mt19937_64 rng(5);
    Tensor big = Tensor::dense(DType::uint8, {(9 << 20) + 3}, random_bytes(rng, (9 << 20) + 3));
    add(path, "v1", tag_with(big), WriterOptions{.durable = durable});
    testing::check_zip_structure(path);
    NewTag nt;
    nt.add(
        "gr\xc3\xb6\xc3\x9f"
        "e",
        Tensor::dense(DType::uint8, {1000}, random_bytes(rng, 1000)));
    nt.add("w", Tensor::dense(DType::uint8, {5 << 20}, random_bytes(rng, 5 << 20)));
    add(path, "v2", std::move(nt), WriterOptions{.durable = durable});
    testing::check_zip_structure(path);
    CHECK(Archive::open(path).verify().empty());
  }
}

TEST_CASE("Twenty appends leave no unused byte") {
  TempDir dir;
  auto path = dir / "m.zip";
  std::mt19937_64 rng(11);
  int appended = 0;
  std::vector<Tensor> saved;
  for (int i = 0; i < 20; ++i) {
    Tensor t = random_tensor(rng, DType::float32);
    saved.push_back(t);
    Writer w = Writer::open(path);
    w.add_tag("t" + std::to_string(i), tag_with(t));
    w.commit();
    appended += w.last_stats().appended;
    CHECK(unused(path) == 0);
  }
  CHECK(appended == 19);  // every commit but the first
  Archive a = Archive::open(path);
  for (int i = 0; i < 20; ++i) CHECK(a.tensor("w", "t" + std::to_string(i)) == saved[i]);
  CHECK(a.verify().empty());
}

TEST_CASE("An archive in the layout of modelzip 0.1.0 is rewritten once, then appended to") {
  TempDir dir;
  auto path = dir / "m.zip";
  fs::copy_file(tests_dir() / "golden" / "core" / "v1-tags-first.zip", path);
  Tensor t = abc();
  Writer w = Writer::open(path);
  w.add_tag("v2", tag_with(t));
  w.commit();
  CHECK_FALSE(w.last_stats().appended);  // tags.txt was not last: compacted
  CHECK(tags_header_offset(io_bytes(path)) > 0);
  CHECK(unused(path) == 0);
  Writer w2 = Writer::open(path);
  w2.add_tag("v3", tag_with(t, "x"));
  w2.commit();
  CHECK(w2.last_stats().appended);
  CHECK(unused(path) == 0);
  Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"base", "Fine-Tune", "v2", "v3"});
  CHECK(a.verify().empty());
}

TEST_CASE("Removing a tag or changing metadata rewrites instead of appending") {
  TempDir dir;
  auto path = dir / "m.zip";
  Tensor t = abc();
  add(path, "a", tag_with(t));
  add(path, "b", tag_with(t, "x"));
  Writer w = Writer::open(path);
  w.remove_tag("a");
  w.commit();
  CHECK_FALSE(w.last_stats().appended);
  CHECK(unused(path) == 0);
  Writer w2 = Writer::open(path, WriterOptions{.append = false});
  w2.add_tag("c", tag_with(t));
  w2.commit();
  CHECK_FALSE(w2.last_stats().appended);
}

TEST_CASE("An interrupted append: readers see the previous archive, the next writer restores it") {
  TempDir dir;
  auto path = dir / "m.zip";
  Tensor t = abc();
  add(path, "v1", tag_with(t));
  const std::string old = io_bytes(path);
  const std::size_t tail = tags_header_offset(old);
  // What a writer killed in the middle of an append leaves: the journal and
  // a tail overwritten by part of the new entries, longer than the old one.
  write_journal_of(path, 99, old, tail);
  write_file(path, old.substr(0, tail) + std::string("PK\x03\x04", 4) + std::string(100000, 'x'));
  Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"v1"});
  CHECK(a.tensor("w") == t);
  CHECK(a.verify().empty());
  // Even a torn tail that still ends with the old end record: the journal
  // decides, not whether the file parses.
  write_file(path, old.substr(0, tail) + std::string(old.size() - tail - 22, 'y') +
                       old.substr(old.size() - 22));
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"v1"});
  Writer next = Writer::open(path);
  next.commit();  // nothing staged: still recovers
  CHECK(io_bytes(path) == old);
  CHECK_FALSE(fs::exists(io::append_journal_path(path)));
  add(path, "v2", tag_with(t, "y"));
  Archive b = Archive::open(path);
  CHECK(b.tags() == std::vector<std::string>{"v1", "v2"});
  CHECK(io_bytes(path).compare(0, tail, old, 0, tail) == 0);
  CHECK(b.verify().empty());
}

TEST_CASE("The journal of an archive that was deleted since is dropped: a new archive is saved") {
  // A save killed mid-append leaves its journal; the user then deletes the
  // archive. The journal can restore nothing; it must neither block the next
  // save nor be applied to the archive that save creates.
  TempDir dir;
  auto path = dir / "m.zip";
  Tensor t = abc();
  add(path, "v1", tag_with(t));
  const std::string old = io_bytes(path);
  const std::size_t tail = tags_header_offset(old);
  write_journal_of(path, 99, old, tail);
  fs::remove(path);
  add(path, "fresh", tag_with(t, "n"));
  CHECK_FALSE(fs::exists(io::append_journal_path(path)));
  Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"fresh"});
  CHECK(a.verify().empty());
  add(path, "second", tag_with(t, "m"));  // appends in place, no journal left
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"fresh", "second"});
}

TEST_CASE("A torn journal means the tail was never touched: the archive is used as it is") {
  TempDir dir;
  auto path = dir / "m.zip";
  Tensor t = abc();
  add(path, "v1", tag_with(t));
  const std::string old = io_bytes(path);
  write_file(io::append_journal_path(path), "modelzip-append v2\n" + std::string(10, '\0'));
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"v1"});
  add(path, "v2", tag_with(t, "z"));
  CHECK_FALSE(fs::exists(io::append_journal_path(path)));
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"v1", "v2"});
}

TEST_CASE("A complete append whose journal remained is rolled back: the removal commits") {
  TempDir dir;
  auto path = dir / "m.zip";
  Tensor t = abc();
  add(path, "v1", tag_with(t));
  const std::string v1 = io_bytes(path);
  const std::size_t tail = tags_header_offset(v1);
  add(path, "v2", tag_with(t, "z"));
  // As if killed just before removing the journal.
  write_journal_of(path, 5, v1, tail);
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"v1"});
  add(path, "v3", tag_with(t, "q"));
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"v1", "v3"});
}

TEST_CASE("A writer opened while another's append completes commits on the completed archive") {
  // Writer B opens while A's append is between writing its new tail and
  // removing its journal: B reads the previous archive (the journal's), and
  // removing the journal commits A's tag without changing the archive file's
  // size or times. B's commit must see A's tag, not reuse what it read at
  // open (it lost the tag: 1 run in 5 of 8 processes saving at once).
  TempDir dir;
  auto path = dir / "m.zip";
  Tensor t = abc();
  add(path, "base", tag_with(t));
  const std::string before = io_bytes(path);
  const std::size_t tail = tags_header_offset(before);
  add(path, "a", tag_with(t, "z"));  // A's append, written in full
  write_journal_of(path, 7, before, tail);
  Writer b = Writer::open(path);
  CHECK(b.tags() == std::vector<std::string>{"base"});  // the journal's archive
  fs::remove(io::append_journal_path(path));            // A commits
  b.add_tag("b", tag_with(t, "q"));
  b.commit();
  Archive after = Archive::open(path);
  CHECK(after.tags() == std::vector<std::string>{"base", "a", "b"});
  CHECK(after.tensor("z", "a") == t);
  CHECK(after.verify().empty());
}

TEST_CASE("A read names the file identity it was taken at only when it read the file itself") {
  // What a writer's open() may reuse at commit (FORMAT.md 8.3): the read's
  // own journal checks decide, not checks made around it. A read through a
  // valid journal (the previous archive) has no identity: the journal's
  // removal commits the append without changing the file's identity. This
  // also covers an append that starts after a check made before the read
  // and sets its new size before the read begins.
  TempDir dir;
  auto path = dir / "m.zip";
  Tensor t = abc();
  add(path, "base", tag_with(t));
  auto identity = [](const Archive& a) { return Archive::Impl::of(a).snapshot_file.identity; };
  CHECK(identity(Archive::open(path)) == io::identity_of(path));
  const std::string before = io_bytes(path);
  const std::size_t tail = tags_header_offset(before);
  add(path, "a", tag_with(t, "z"));
  write_journal_of(path, 7, before, tail);
  Archive through_journal = Archive::open(path);
  CHECK(through_journal.tags() == std::vector<std::string>{"base"});
  CHECK_FALSE(identity(through_journal).has_value());
  fs::remove(io::append_journal_path(path));
  Archive committed = Archive::open(path);
  CHECK(committed.tags() == std::vector<std::string>{"base", "a"});
  CHECK(identity(committed) == io::identity_of(path));
}

TEST_CASE("A read through a journal whose removal commits meanwhile is no longer current") {
  // A reader that finds an in-place removal's journal takes the previous
  // archive (the file's prefix, mapped, and the journal's tail) and parses
  // its directory and the tags' tables once the journal was found again.
  // If the removal commits right then, its writer formats a free entry over
  // the removed tag's params.txt (FORMAT.md 8.5) under that parse: "local
  // header name differs from the central directory" for a sound archive (2
  // reader processes met it in 4 of 6 runs of benchmarks/concurrent_stress.py).
  // snapshot_current tells Archive::open to read again. The state is built by
  // hand: the removal done, then its journal put back.
  TempDir dir;
  auto path = dir / "m.zip";
  Tensor t = abc();
  Tensor big = Tensor::dense(DType::int8, {8192}, Bytes::copy_of(std::string(8192, 'x')));
  add(path, "old", tag_with(t));
  add(path, "new", tag_with(big, "z"));  // more live bytes than freed: in place
  const std::string before = io_bytes(path);
  const std::size_t tail = tags_header_offset(before);
  {
    Writer w = Writer::open(path);
    w.remove_tag("old");
    w.commit();
    CHECK(w.last_stats().appended);
  }
  CHECK(io_bytes(path).find(".modelzip-free/") != std::string::npos);
  write_journal_of(path, 9, before, tail);
  modelzip::zip::SnapshotFile file;
  Bytes previous;
  modelzip::zip::read_snapshot(path, "tags.txt", Limits{}, [&](modelzip::zip::Snapshot& s) {
    CHECK_FALSE(s.directory.has_value());  // parsed by the caller
    previous = s.bytes;
    file = s.file;
  });
  CHECK(modelzip::zip::snapshot_current(path, file));
  fs::remove(io::append_journal_path(path));  // the removal commits
  CHECK_FALSE(modelzip::zip::snapshot_current(path, file));
  CHECK_THROWS_WITH(Archive::Impl(path.string(), previous, OpenOptions{}),
                    doctest::Contains("local header name differs"));
  Archive now = Archive::open(path);
  CHECK(now.tags() == std::vector<std::string>{"new"});
  CHECK(modelzip::zip::snapshot_current(path, Archive::Impl::of(now).snapshot_file));
  CHECK(now.verify().empty());
}

TEST_CASE("Archive::open reads again, within one limit of attempts, while the archive changes") {
  // One attempt of an open is the reader protocol, the parse of the
  // directory and tables and the check that the snapshot is still current
  // (FORMAT.md 8.3): a change under the parse costs one attempt of the same
  // 50 (zip::read_snapshot), not a new round of them. The archive is
  // changed after each parse (a new modification time, as a commit that
  // removes tags in place gives it).
  TempDir dir;
  auto path = dir / "m.zip";
  add(path, "v1", tag_with(abc()));
  auto touch = [&](int n) {
    fs::last_write_time(path, fs::file_time_type(std::chrono::seconds(1000000 + n)));
  };
  SUBCASE("changed under the first 3 parses: 4 attempts") {
    int parses = 0;
    Archive a = Archive::Impl::open_file(path, {}, [&] {
      if (++parses <= 3) touch(parses);
    });
    CHECK(parses == 4);
    CHECK(a.tags() == std::vector<std::string>{"v1"});
    CHECK(modelzip::zip::snapshot_current(path, Archive::Impl::of(a).snapshot_file));
  }
  SUBCASE("changed under every parse: the error after exactly the limit") {
    int parses = 0;
    try {
      (void)Archive::Impl::open_file(path, {}, [&] { touch(++parses); });
      FAIL("the open succeeded");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::io);
      CHECK(e.context().archive == path.string());
      CHECK_MESSAGE(
          std::string(e.what()).find("the archive kept changing while it was being "
                                     "opened: in each of 50 attempts") != std::string::npos,
          e.what());
    }
    CHECK(parses == modelzip::zip::kSnapshotAttempts);
  }
}

TEST_CASE("A valid journal whose tail starts past the end of the file belongs to no archive") {
  // FORMAT.md sections 8.2 and 8.3: readers and writers both stop with an
  // error naming the journal; neither reads the file as if there were none.
  TempDir dir;
  auto path = dir / "m.zip";
  Tensor t = abc();
  add(path, "v1", tag_with(t));
  const std::string v1 = io_bytes(path);
  const std::uint64_t past_end = v1.size() + 100;
  io::write_append_journal(path, {7, past_end, past_end + 3, Bytes::copy_of(std::string("xyz"))},
                           false);
  const std::string journal = io::append_journal_path(path).filename().string();
  for (int reader = 1; reader >= 0; --reader) {
    CAPTURE(reader);
    try {
      if (reader) {
        (void)Archive::open(path);
      } else {
        add(path, "v2", tag_with(t, "z"));
      }
      FAIL("no error for a journal past the end of the file");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::corrupt);
      CHECK(e.message().find("tail from offset " + std::to_string(past_end)) != std::string::npos);
      CHECK(e.message().find(journal) != std::string::npos);
    }
  }
  CHECK(io_bytes(path) == v1);  // the archive is untouched
  CHECK(fs::exists(io::append_journal_path(path)));
}

TEST_CASE("An archive comment stays through appends, which still overwrite only the tail") {
  TempDir dir;
  auto path = dir / "m.zip";
  Tensor t = abc();
  add(path, "v1", tag_with(t));
  // Give the archive a comment: the end record's last field is its length.
  std::string bytes = io_bytes(path);
  const std::string comment = "made by a test";
  REQUIRE(bytes.compare(bytes.size() - 22, 4, std::string("PK\x05\x06", 4)) == 0);
  bytes[bytes.size() - 2] = static_cast<char>(comment.size());
  write_file(path, bytes + comment);
  Writer w = Writer::open(path);
  w.add_tag("v2", tag_with(t, "x"));
  w.commit();
  CHECK(w.last_stats().appended);
  const std::string after = io_bytes(path);
  CHECK(after.ends_with(comment));
  CHECK(unused(path) == 0);
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"v1", "v2"});
  // Trailing bytes after the end record: the next commit rewrites.
  write_file(path, after + "\n");
  Writer w2 = Writer::open(path);
  w2.add_tag("v3", tag_with(t, "y"));
  w2.commit();
  CHECK_FALSE(w2.last_stats().appended);
  CHECK(io_bytes(path).ends_with(comment));
  CHECK(unused(path) == 0);
}

TEST_CASE("Through a symbolic link, readers find the journal beside the link or its target") {
  TempDir dir;
  fs::create_directory(dir / "real");
  auto target = dir / "real" / "m.zip";
  auto link = dir / "link.zip";
  Tensor t = abc();
  add(target, "v1", tag_with(t));
  fs::create_symlink(target, link);
  const std::string old = io_bytes(target);
  const std::size_t tail = tags_header_offset(old);
  const std::string torn = old.substr(0, tail) + std::string(3000, 'z');
  for (const auto& beside : {link, target}) {
    INFO(beside);
    write_file(target, torn);  // a tail overwritten in part
    write_journal_of(beside, 3, old, tail, false);
    CHECK(Archive::open(link).tags() == std::vector<std::string>{"v1"});
    fs::remove(io::append_journal_path(beside));
  }
  write_file(target, old);
}
