// The rules of schemas/FORMAT.md that an independent implementation found
// open (issue 13 section 4), as the Writer and Archive apply them: archives
// without tags, which names under params/ and updater/ are blobs, folder
// entries, and what deduplication compares.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <optional>

#include "../hostile/hostile_archives.hpp"
#include "../zip/expect_error.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/entry_stream.hpp"
#include "modelzip/writer.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

Tensor floats(std::vector<float> v) {
  const auto n = static_cast<std::int64_t>(v.size());
  return Tensor::dense(DType::float32, {n}, Bytes::copy_of(le_bytes(v)));
}

// `size` bytes that deflate cannot shrink much, the same for a `seed`.
std::string noise(std::size_t size, std::uint32_t seed) {
  std::string out(size, '\0');
  std::uint32_t x = seed;
  for (char& c : out) c = static_cast<char>((x = x * 1103515245u + 12345u) >> 24);
  return out;
}

// The damaged entries both tests of partial reads read: "crc.bin" (5000
// bytes of `data`, deflated, with a wrong CRC-32), "cut.bin" (`data`
// deflated, the second half of the deflated data missing) and "lie.bin" (64
// bytes deflated, declaring 3000).
ZipEntrySpec wrong_crc(const std::string& data) {
  ZipEntrySpec e = deflated("crc.bin", data.substr(0, 5000));
  e.crc = 1;
  return e;
}
ZipEntrySpec cut(const std::string& data) {
  ZipEntrySpec e = deflated("cut.bin", data);
  const std::string packed = deflate_raw(data);
  e.raw_data = packed.substr(0, packed.size() / 2);
  return e;
}
ZipEntrySpec lie() {
  ZipEntrySpec e = deflated("lie.bin", std::string(64, 'q'));
  e.uncompressed_size = 3000;
  return e;
}

void add(const std::filesystem::path& path, const std::string& tag, const Tensor& t) {
  Writer w = Writer::open(path);
  NewTag nt;
  nt.add("w", t);
  w.add_tag(tag, std::move(nt));
  w.commit();
}

}  // namespace

TEST_CASE("Removing the last tag leaves a valid archive without tags (section 4.1)") {
  TempDir dir;
  const auto path = dir / "m.zip";
  add(path, "only", floats({1, 2}));
  {
    Writer w = Writer::open(path);
    w.remove_tag("only");
    w.commit();
  }
  Archive a = Archive::open(path);
  CHECK(a.tags().empty());
  CHECK(a.entry_names() == std::vector<std::string>{"modelzip.toml", "tags.txt"});
  CHECK(a.verify().empty());
  CHECK_ERROR(a.load(), ErrorCode::not_found, "the archive has no tags");
  CHECK_ERROR(a.params(), ErrorCode::not_found, "the archive has no tags");
  CHECK_ERROR(a.newest_tag(), ErrorCode::not_found, "the archive has no tags");
  // The tag is in the error's context (Python's NotFoundError.tag), and so in the text.
  CHECK_ERROR(a.load("only"), ErrorCode::not_found, "tag 'only': no such tag");
  // A reader of the format accepts an empty tags.txt written by anyone.
  ZipSpec spec;
  spec.entries = {stored("modelzip.toml", "format_version = 1\n"), stored("tags.txt", "")};
  CHECK(Archive::from_memory(Bytes::copy_of(build_zip(spec).bytes), "e.zip").tags().empty());
  // And a tag can be added again.
  add(path, "again", floats({3}));
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"again"});
}

TEST_CASE("Files under params/ and updater/ that are not blob names are kept, never decoded") {
  TempDir dir;
  const auto path = dir / "m.zip";
  ZipSpec spec = minimal_archive();
  const std::vector<std::string> others = {"t1/params/00.fb",    "t1/params/-1.fb",
                                           "t1/params/sub/1.fb", "t1/params/1.FB",
                                           "t1/params/1.fb.bak", "t1/updater/x.fb",
                                           "t1/updater/1.fifu",  "t1/params/1234567890123456.fb"};
  for (const auto& name : others) spec.entries.push_back(stored(name, "garbage of " + name));
  spec.entries.push_back(stored("other/", ""));  // a folder entry outside every tag folder
  spec.entries.push_back(stored("t1/params/5.fb", good_blob()));  // an unreferenced blob
  write_file(path, build_zip(spec).bytes);
  REQUIRE(Archive::open(path).verify().empty());

  add(path, "t2", floats({9, 8, 7}));  // appends or rewrites: the old entries stay
  {
    Writer w = Writer::open(path);
    NewTag t3;
    t3.add("w", floats({1}));
    w.add_tag("t3", std::move(t3));
    w.collect_garbage();  // a rewrite that drops unreferenced blobs only
    w.commit();
    CHECK(w.last_stats().blobs_collected == 1);
  }
  Archive a = Archive::open(path);
  for (const auto& name : others) {
    INFO(name);
    REQUIRE(a.has_entry(name));
    CHECK(a.entry(name, ReadMode::copy).as_string_view() == "garbage of " + name);
  }
  CHECK_FALSE(a.has_entry("t1/params/5.fb"));  // a blob: collected
  CHECK_FALSE(a.has_entry("other/"));          // folder entries are not kept
  CHECK(a.verify().empty());
  {
    Writer w = Writer::open(path);
    w.remove_tag("t1");
    w.commit();
  }
  for (const auto& name : Archive::open(path).entry_names()) CHECK(name.rfind("t1/", 0) != 0);
}

TEST_CASE("Dedup compares whole blob entries: equal tensors under another header are not shared") {
  TempDir dir;
  const auto path = dir / "m.zip";
  // Another conforming writer's blob of {1, 2}: alignment 128, data at 128.
  ZipSpec spec = minimal_archive();
  {
    BlobSpec s;
    s.shape = std::vector<std::int64_t>{2};
    s.alignment = 128;
    s.values = {{128, 8}};
    set_entry(spec, "t1/params/0.fb", blob_entry(s, le_bytes(std::vector<float>{1, 2}), 128));
  }
  write_file(path, build_zip(spec).bytes);
  const Tensor same = floats({1, 2});
  REQUIRE(Archive::open(path).tensor("w", "t1") == same);

  Writer w = Writer::open(path);
  NewTag t2;
  t2.add("w", same);
  w.add_tag("t2", std::move(t2));
  w.commit();
  CHECK(w.last_stats().blobs_deduplicated == 0);
  CHECK(w.last_stats().blobs_written == 1);
  CHECK_FALSE(Archive::open(path).param("w", "t2").shared);
  // The same tensor again: now equal to modelzip's own blob of t2.
  NewTag t3;
  t3.add("w", same);
  w.add_tag("t3", std::move(t3));
  w.commit();
  CHECK(w.last_stats().blobs_deduplicated == 1);
  CHECK(Archive::open(path).param("w", "t3").owner_tag == "t2");
}

TEST_CASE("An empty archive path is refused by name, as Writer::open refuses it") {
  // Archive::open("") said only "cannot open: No such file or directory".
  CHECK_ERROR(Archive::open(""), ErrorCode::invalid_argument,
              "the archive path is empty: name the archive file");
  CHECK_ERROR(Writer::open(""), ErrorCode::invalid_argument,
              "the archive path is empty: name the archive file");
}

TEST_CASE("entry_size is the size the central directory declares, known without reading") {
  ZipSpec s = minimal_archive();
  s.entries.push_back(stored("plain.txt", "twelve bytes"));
  s.entries.push_back(deflated("packed.txt", std::string(5000, 'z')));
  // Declares more than its data holds (within the deflate ratio open checks):
  // entry_size reports the declaration; only a read finds the lie.
  ZipEntrySpec lie = deflated("lie.bin", std::string(64, 'q'));
  lie.uncompressed_size = 3000;
  s.entries.push_back(lie);
  const Archive a = Archive::from_memory(Bytes::copy_of(build_zip(s).bytes), "crafted.zip");
  for (const std::string& name : a.entry_names()) {
    INFO(name);
    if (name == "lie.bin") continue;
    CHECK(a.entry_size(name) == a.entry(name, ReadMode::copy).size());
  }
  CHECK(a.entry_size("plain.txt") == 12);
  CHECK(a.entry_size("packed.txt") == 5000);
  CHECK(a.entry_size("lie.bin") == 3000);
  CHECK_ERROR(a.entry("lie.bin", ReadMode::copy), ErrorCode::corrupt, "lie.bin");
  REQUIRE_ERROR_AS(e, a.entry_size("none"), ErrorCode::not_found, "no such entry");
  CHECK(e.context().entry == "none");
  CHECK(e.context().archive == "crafted.zip");
}

TEST_CASE("entry_part reads a range, decompressing a deflated entry only up to the part's end") {
  // Bytes deflate cannot shrink much, so that half the deflated data holds
  // about half the entry.
  const std::string noise = ::noise(12u << 20, 12345);
  ZipSpec s = minimal_archive();
  s.entries.push_back(stored("plain.bin", noise.substr(0, 5000)));
  s.entries.push_back(deflated("packed.bin", noise));
  s.entries.push_back(wrong_crc(noise));
  s.entries.push_back(cut(noise));
  s.entries.push_back(lie());
  const Archive a = Archive::from_memory(Bytes::copy_of(build_zip(s).bytes), "crafted.zip");
  const auto part = [&](const std::string& name, std::uint64_t offset, std::uint64_t length) {
    return std::string(a.entry_part(name, offset, length).as_string_view());
  };
  for (const std::string name : {"plain.bin", "packed.bin"}) {
    INFO(name);
    const std::uint64_t size = a.entry_size(name);
    for (const auto& range : std::vector<std::pair<std::uint64_t, std::uint64_t>>{
             {0, 0}, {0, 1}, {1, 4000}, {4999, 1}, {0, size}, {size, 0}, {size - 7, 7}}) {
      // Not a structured binding: INFO captures it in a lambda (clang 14).
      const std::uint64_t offset = range.first, length = range.second;
      INFO(offset, " ", length);
      CHECK(part(name, offset, length) == noise.substr(offset, length));
    }
  }
  // Across the 4 MiB pieces the deflated entry streamed in, and the 64 KiB
  // buffer it skips to a part's start in: parts starting and ending on each
  // side of its boundaries, up to the entry's end.
  CHECK(part("packed.bin", (4u << 20) - 3, 10) == noise.substr((4u << 20) - 3, 10));
  const std::uint64_t packed = noise.size();
  for (const std::uint64_t offset :
       {std::uint64_t{1}, std::uint64_t{65535}, std::uint64_t{65536}, std::uint64_t{65537},
        std::uint64_t{3 * 65536 + 5}, std::uint64_t{(4u << 20) + 1}, packed - 65537, packed - 65536,
        packed - 1}) {
    for (const std::uint64_t length :
         {std::uint64_t{1}, std::uint64_t{65535}, std::uint64_t{65536 * 2 + 1}, packed - offset}) {
      if (length > packed - offset) continue;
      INFO(offset, " ", length);
      CHECK(part("packed.bin", offset, length) == noise.substr(offset, length));
    }
  }
  // Past the end: refused before anything is read, naming the entry.
  REQUIRE_ERROR_AS(past, a.entry_part("packed.bin", packed - 1, 2), ErrorCode::invalid_argument,
                   "2 bytes from byte " + std::to_string(packed - 1) + " lie outside");
  CHECK(past.context().entry == "packed.bin");
  CHECK_ERROR(a.entry_part("packed.bin", packed + 1, 0), ErrorCode::invalid_argument, "outside");
  // Only what the part needs is decompressed: a part before the missing data
  // reads; a part, or the whole entry, that reaches it is refused.
  CHECK(part("cut.bin", 1000, 1u << 20) == noise.substr(1000, 1u << 20));
  CHECK_ERROR(a.entry_part("cut.bin", 0, noise.size()), ErrorCode::corrupt, "cut.bin");
  CHECK_ERROR(a.entry_part("cut.bin", 10u << 20, 10), ErrorCode::corrupt, "cut.bin");
  // A shorter part is not checked; the whole entry and a part that ends it are.
  CHECK(part("crc.bin", 0, 4999) == noise.substr(0, 4999));
  CHECK_ERROR(a.entry_part("crc.bin", 0, 5000), ErrorCode::corrupt, "CRC-32");
  CHECK_ERROR(a.entry_part("crc.bin", 4000, 1000), ErrorCode::corrupt, "CRC-32");
  // The declared size sizes nothing: the data there is reads; beyond it, corrupt.
  CHECK(part("lie.bin", 10, 20) == std::string(20, 'q'));
  CHECK_ERROR(a.entry_part("lie.bin", 100, 10), ErrorCode::corrupt, "lie.bin");
  REQUIRE_ERROR_AS(e, a.entry_part("plain.bin", 4990, 11), ErrorCode::invalid_argument,
                   "11 bytes from byte 4990 lie outside the entry's 5000");
  CHECK(e.context().entry == "plain.bin");
  CHECK_ERROR(a.entry_part("plain.bin", UINT64_MAX, 2), ErrorCode::invalid_argument, "outside");
  CHECK_ERROR(a.entry_part("none", 0, 0), ErrorCode::not_found, "no such entry");
}

TEST_CASE("EntryStream reads an entry front to back in parts, checking it at its end") {
  const std::string noise = ::noise(9u << 20, 54321);
  ZipSpec s = minimal_archive();
  s.entries.push_back(stored("plain.bin", noise.substr(0, 5000)));
  s.entries.push_back(deflated("packed.bin", noise));
  s.entries.push_back(deflated("empty.bin", ""));
  s.entries.push_back(wrong_crc(noise));
  ZipEntrySpec stored_crc = stored("scrc.bin", noise.substr(0, 300));
  stored_crc.crc = 1;
  s.entries.push_back(stored_crc);
  s.entries.push_back(cut(noise));
  s.entries.push_back(lie());
  ZipEntrySpec shorter = deflated("short.bin", std::string(64, 'q'));  // declares less
  shorter.uncompressed_size = 60;
  s.entries.push_back(shorter);
  std::optional<Archive> a =
      Archive::from_memory(Bytes::copy_of(build_zip(s).bytes), "crafted.zip");
  // The whole entry through parts of `part` bytes.
  const auto read_all = [](EntryStream& stream, std::size_t part) {
    std::string out;
    std::vector<std::byte> buffer(part);
    const std::uint64_t start = stream.position();
    while (const std::size_t n = stream.read(buffer)) {
      out.append(reinterpret_cast<const char*>(buffer.data()), n);
      CHECK(stream.position() == start + out.size());
      if (n < part) CHECK(stream.read(buffer) == 0);  // fewer: the end
    }
    return out;
  };
  for (const std::string name : {"plain.bin", "packed.bin", "empty.bin"}) {
    for (const std::size_t part : {std::size_t{1} << 20, std::size_t{4999}, std::size_t{5000}}) {
      INFO(name, " in parts of ", part);
      EntryStream stream = EntryStream::open(*a, name);
      CHECK(stream.size() == a->entry_size(name));
      CHECK(stream.compressed() == (name != "plain.bin"));
      CHECK(read_all(stream, part) == std::string(a->entry(name, ReadMode::copy).as_string_view()));
    }
  }
  // The stream keeps the archive's state: it reads on after the Archive is gone.
  EntryStream kept = EntryStream::open(*a, "packed.bin");
  std::vector<std::byte> first(10);
  CHECK(kept.read(first) == 10);
  a.reset();
  CHECK(read_all(kept, 3u << 20) == noise.substr(10));
  CHECK(kept.position() == noise.size());
  a = Archive::from_memory(Bytes::copy_of(build_zip(s).bytes), "crafted.zip");
  // A damaged entry: the read that reaches the damage throws, naming the
  // entry, and so does every read after it. A CRC-32 is checked by the read
  // that returns the last bytes.
  for (const std::string name : {"crc.bin", "scrc.bin", "cut.bin", "lie.bin", "short.bin"}) {
    INFO(name);
    EntryStream stream = EntryStream::open(*a, name);
    std::vector<std::byte> buffer(1u << 20);
    REQUIRE_ERROR_AS(e, (void)read_all(stream, buffer.size()), ErrorCode::corrupt, name);
    CHECK(e.context().entry == name);
    CHECK(e.context().archive == "crafted.zip");
    CHECK_ERROR(stream.read(buffer), ErrorCode::corrupt, name);
  }
  {
    EntryStream stream = EntryStream::open(*a, "crc.bin");
    std::vector<std::byte> buffer(4999);
    CHECK(stream.read(buffer) == 4999);  // not the end: not checked yet
    CHECK_ERROR(stream.read(buffer), ErrorCode::corrupt, "CRC-32");
  }
  // Only what is read is decompressed: the first half of "cut.bin" reads.
  {
    EntryStream stream = EntryStream::open(*a, "cut.bin");
    std::vector<std::byte> buffer(1u << 20);
    CHECK(stream.read(buffer) == buffer.size());
    CHECK(std::memcmp(buffer.data(), noise.data(), buffer.size()) == 0);
  }
  CHECK_ERROR(EntryStream::open(*a, "none"), ErrorCode::not_found, "no such entry");
  EntryStream moved = EntryStream::open(*a, "plain.bin");
  EntryStream to = std::move(moved);
  std::vector<std::byte> buffer(10);
  CHECK_ERROR(moved.read(buffer), ErrorCode::invalid_argument, "moved-from");  // NOLINT
  CHECK_FALSE(moved.compressed());                                             // NOLINT
  CHECK(to.read(buffer) == 10);
}
