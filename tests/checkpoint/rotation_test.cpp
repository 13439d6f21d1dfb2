// Removing tags in place, replace_tag and keep_last: a commit that removes
// tags leaves their bytes in the file as free entries (FORMAT.md section
// 8.5), writes only what changes, and every reader (the central directory
// and a walk of the local headers in file order, as streaming readers do)
// still reads every live entry with its CRC.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "checkpoint/archive_impl.hpp"
#include "checkpoint/tensor_stream.hpp"
#include "expect_error_text.hpp"
#include "io/append_journal.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/entry_stream.hpp"
#include "modelzip/error.hpp"
#include "modelzip/writer.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kBig = 300 << 10;  // above the zip writer's inline size (256 KiB)

// What an Archive says of bytes that changed since it opened the file.
constexpr const char* kChangedByAnother =
    "the archive was changed by another writer since this reader opened it";

NewTag tag_with(const Tensor& t, const std::string& name = "w") {
  NewTag nt;
  nt.add(name, t);
  return nt;
}

Tensor random_tensor(std::mt19937_64& rng, std::size_t n) {
  return Tensor::dense(DType::uint8, {static_cast<std::int64_t>(n)}, random_bytes(rng, n));
}

std::string bytes_of_tensor(const Tensor& t) {
  return std::string(t.values().as_string_view());
}

std::uint32_t le32(const std::string& s, std::size_t at) {
  std::uint32_t v = 0;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}
std::uint16_t le16(const std::string& s, std::size_t at) {
  std::uint16_t v = 0;
  std::memcpy(&v, s.data() + at, 2);
  return v;
}

// What a streaming reader sees: the local headers from offset 0 in file
// order up to the first central directory header, each entry's data
// checked against its header's CRC with zlib (stored entries only, as
// modelzip writes tables and blobs). Fails the test on a malformed header
// or a CRC mismatch; returns the names in order.
std::vector<std::string> walk_local_headers(const fs::path& path) {
  const std::string bytes = io_bytes(path);
  std::vector<std::string> names;
  std::size_t at = 0;
  while (at + 30 <= bytes.size() && le32(bytes, at) == 0x04034b50) {
    const std::uint16_t method = le16(bytes, at + 8);
    const std::uint32_t crc = le32(bytes, at + 14);
    const std::uint64_t size = le32(bytes, at + 18);
    const std::size_t name_len = le16(bytes, at + 26), extra_len = le16(bytes, at + 28);
    const std::string name = bytes.substr(at + 30, name_len);
    INFO("entry " << name << " at " << at);
    REQUIRE(method == 0);
    REQUIRE(size != 0xFFFFFFFFu);
    const std::size_t data = at + 30 + name_len + extra_len;
    REQUIRE(data + size <= bytes.size());
    const auto computed =
        ::crc32(0, reinterpret_cast<const Bytef*>(bytes.data() + data), static_cast<uInt>(size));
    CHECK(computed == crc);
    names.push_back(name);
    at = data + size;
  }
  CHECK(le32(bytes, at) == 0x02014b50);  // the walk ends at the central directory
  return names;
}

// The walk without free entries equals the central directory in file order.
void check_streaming_view(const fs::path& path, std::size_t expected_free = SIZE_MAX) {
  std::vector<std::string> live, free;
  for (const auto& n : walk_local_headers(path))
    (n.starts_with(".modelzip-free/") ? free : live).push_back(n);
  Archive a = Archive::open(path);
  std::vector<const modelzip::zip::EntryInfo*> cd;
  for (const auto& e : Archive::Impl::of(a).directory.entries) cd.push_back(&e);
  std::sort(cd.begin(), cd.end(),
            [](auto* x, auto* y) { return x->local_header_offset < y->local_header_offset; });
  std::vector<std::string> cd_names;
  for (auto* e : cd) cd_names.push_back(e->name);
  CHECK(live == cd_names);
  if (expected_free != SIZE_MAX) CHECK(free.size() == expected_free);
  CHECK(a.verify().empty());
}

// Archive with tags t0..t<n-1>, each one tensor "w" of kBig random bytes.
std::vector<Tensor> build(const fs::path& path, int n, std::mt19937_64& rng) {
  std::vector<Tensor> tensors;
  for (int k = 0; k < n; ++k) {
    tensors.push_back(random_tensor(rng, kBig));
    Writer w = Writer::open(path);
    w.add_tag("t" + std::to_string(k), tag_with(tensors.back()));
    w.commit();
  }
  return tensors;
}

// Removes `tag` in one commit; returns the commit's statistics.
Writer::Stats remove(const fs::path& path, const std::string& tag) {
  Writer w = Writer::open(path);
  w.remove_tag(tag);
  w.commit();
  return w.last_stats();
}

// Adds `tag` with a small random tensor in one commit; returns its statistics.
Writer::Stats add_small(const fs::path& path, const std::string& tag, std::mt19937_64& rng) {
  Writer w = Writer::open(path);
  w.add_tag(tag, tag_with(random_tensor(rng, 100)));
  w.commit();
  return w.last_stats();
}

// The one problem verify() of `reader` finds: `entry` changed since the
// reader opened the archive (another writer's commit), not damage.
Problem check_changed_since_open(const Archive& reader, const std::string& entry) {
  const auto problems = reader.verify();
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].entry == entry);
  CHECK(problems[0].message.find(kChangedByAnother) != std::string::npos);
  return problems[0];
}

// The problems verify() of `reader` finds, the first of them: the data of
// `entry` is damaged (its CRC-32 does not match).
std::vector<Problem> check_damaged(const Archive& reader, const std::string& entry) {
  const auto problems = reader.verify();
  REQUIRE(!problems.empty());
  CHECK(problems[0].entry == entry);
  CHECK(problems[0].message.find("CRC-32 mismatch: the entry data is damaged") !=
        std::string::npos);
  return problems;
}

std::string first_param_bytes(const fs::path& path, const std::string& tag) {
  Archive a = Archive::open(path);
  return bytes_of_tensor(a.tensor("w", tag));
}

}  // namespace

TEST_CASE("Removing the oldest tag in place writes only the tail and leaves one free entry") {
  TempDir dir;
  const auto path = dir / "m.zip";
  std::mt19937_64 rng(1);
  const auto tensors = build(path, 4, rng);
  const auto size_before = fs::file_size(path);
  Archive old = Archive::open(path);
  const Tensor old_view = old.tensor("w", "t0");

  const Writer::Stats s = remove(path, "t0");
  CHECK(s.appended);
  CHECK(s.bytes_freed > kBig);
  CHECK(s.bytes_written < 16384);            // the tail, not the tensor
  CHECK(fs::file_size(path) < size_before);  // a smaller directory; the bytes stay
  CHECK(fs::file_size(path) > size_before - 4096);

  Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"t1", "t2", "t3"});
  for (int k = 1; k < 4; ++k)
    CHECK(first_param_bytes(path, "t" + std::to_string(k)) == bytes_of_tensor(tensors[k]));
  // A reader that opened the archive before still reads the removed tag.
  CHECK(bytes_of_tensor(old_view) == bytes_of_tensor(tensors[0]));
  check_streaming_view(path, 1);
}

TEST_CASE("Adjacent freed ranges merge; appends and removals keep the archive in place") {
  TempDir dir;
  const auto path = dir / "m.zip";
  std::mt19937_64 rng(2);
  auto tensors = build(path, 6, rng);
  for (const char* tag : {"t0", "t1"}) CHECK(remove(path, tag).appended);
  check_streaming_view(path, 1);  // t0's and t1's bytes: one free entry
  {
    Writer w = Writer::open(path);
    w.remove_tag("t5");  // the newest: its range ends at the old tail
    tensors.push_back(random_tensor(rng, 1000));
    w.add_tag("t6", tag_with(tensors.back()));
    w.commit();  // 3 tags freed, 3 tags and a little more live: in place
    CHECK(w.last_stats().appended);
  }
  check_streaming_view(path, 2);
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"t2", "t3", "t4", "t6"});
  CHECK(first_param_bytes(path, "t6") == bytes_of_tensor(tensors[6]));
  CHECK(first_param_bytes(path, "t2") == bytes_of_tensor(tensors[2]));
}

TEST_CASE("A blob that other tags share moves by copy; their tables are written anew") {
  TempDir dir;
  const auto path = dir / "m.zip";
  std::mt19937_64 rng(3);
  const Tensor shared = random_tensor(rng, kBig);
  const Tensor own = random_tensor(rng, 5000);
  {
    Writer w = Writer::open(path);
    w.add_tag("t0", tag_with(shared));
    w.add_tag("t1", tag_with(random_tensor(rng, kBig)));
    w.commit();
  }
  for (const char* tag : {"t2", "t3"}) {
    Writer w = Writer::open(path);
    NewTag nt;
    nt.share("w", "t0", "w");
    nt.add("own", own);
    w.add_tag(tag, std::move(nt));
    w.commit();
  }
  const Writer::Stats s = remove(path, "t0");
  CHECK(s.appended);
  CHECK(s.bytes_written > kBig);  // the shared blob, copied
  CHECK(s.bytes_written < kBig + 32768);
  Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"t1", "t2", "t3"});
  for (const char* tag : {"t2", "t3"}) {
    CHECK(bytes_of_tensor(a.tensor("w", tag)) == bytes_of_tensor(shared));
    CHECK(bytes_of_tensor(a.tensor("own", tag)) == bytes_of_tensor(own));
  }
  // The oldest remaining tag that shares it owns it now (t1 does not share it).
  for (const auto& p : a.params("t3"))
    if (p.name == "w") CHECK(p.blob.starts_with("t2/"));
  check_streaming_view(path);
}

TEST_CASE("replace_tag replaces a tag in one commit and makes it the newest") {
  TempDir dir;
  const auto path = dir / "m.zip";
  std::mt19937_64 rng(4);
  auto tensors = build(path, 3, rng);
  const Tensor fresh = random_tensor(rng, kBig);
  {
    Writer w = Writer::open(path);
    CHECK_THROWS_AS(w.add_tag("T1", tag_with(fresh)), Error);  // exists (any case)
    w.replace_tag("T1", tag_with(fresh));
    CHECK(w.tags() == std::vector<std::string>{"t0", "t2", "T1"});
    w.commit();
    CHECK(w.last_stats().appended);
    CHECK(w.last_stats().bytes_freed > kBig);
  }
  Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"t0", "t2", "T1"});
  CHECK(bytes_of_tensor(a.tensor("w", "T1")) == bytes_of_tensor(fresh));
  CHECK(bytes_of_tensor(a.tensor("w", "t0")) == bytes_of_tensor(tensors[0]));
  check_streaming_view(path, 1);
  // A tag that does not exist is simply added.
  Writer w = Writer::open(path);
  w.replace_tag("new", tag_with(random_tensor(rng, 100)));
  w.commit();
  CHECK(Archive::open(path).tags().back() == "new");
}

TEST_CASE("replace_tag of a tag another writer added meanwhile replaces it") {
  TempDir dir;
  const auto path = dir / "m.zip";
  std::mt19937_64 rng(5);
  build(path, 1, rng);
  Writer late = Writer::open(path);
  late.replace_tag("latest", tag_with(random_tensor(rng, 64)));
  {
    Writer w = Writer::open(path);
    w.add_tag("latest", tag_with(random_tensor(rng, 64)));
    w.commit();
  }
  late.commit();
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"t0", "latest"});
}

TEST_CASE("keep_last removes the oldest tags in the same commit as an add") {
  TempDir dir;
  const auto path = dir / "m.zip";
  std::mt19937_64 rng(6);
  auto tensors = build(path, 5, rng);
  Writer w = Writer::open(path);
  CHECK_THROWS_AS(w.keep_last(0), Error);
  tensors.push_back(random_tensor(rng, 2000));
  w.add_tag("t5", tag_with(tensors.back()));
  w.keep_last(4);
  CHECK(w.tags() == std::vector<std::string>{"t2", "t3", "t4", "t5"});
  w.commit();
  CHECK(w.last_stats().appended);
  CHECK(w.last_stats().bytes_freed > 2 * kBig);
  Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"t2", "t3", "t4", "t5"});
  for (int k = 2; k < 6; ++k)
    CHECK(bytes_of_tensor(a.tensor("w", "t" + std::to_string(k))) == bytes_of_tensor(tensors[k]));
  check_streaming_view(path, 1);
  // Fewer tags than N: nothing to remove.
  Writer again = Writer::open(path);
  again.keep_last(10);
  again.commit();
  CHECK(Archive::open(path).tags().size() == 4);
}

TEST_CASE("A commit that would leave more free than live bytes rewrites; gc drops free entries") {
  TempDir dir;
  const auto path = dir / "m.zip";
  std::mt19937_64 rng(7);
  build(path, 3, rng);
  CHECK(remove(path, "t0").appended);
  const auto with_free = fs::file_size(path);
  {
    Writer w = Writer::open(path);
    w.collect_garbage();
    w.commit();
    CHECK_FALSE(w.last_stats().appended);
  }
  CHECK(fs::file_size(path) < with_free - kBig);
  check_streaming_view(path, 0);
  {
    Writer w = Writer::open(path);
    w.remove_tag("t1");
    w.add_tag("small", tag_with(random_tensor(rng, 10)));
    w.commit();  // 1 tag freed against 1 tag and more live: in place
    CHECK(w.last_stats().appended);
  }
  CHECK_FALSE(remove(path, "t2").appended);  // 2 tags free against a few bytes live
  check_streaming_view(path, 0);
  CHECK(fs::file_size(path) < 4096);
}

TEST_CASE("Freed ranges left unmarked (a writer killed after its commit) are marked later") {
  TempDir dir;
  const auto path = dir / "m.zip";
  std::mt19937_64 rng(8);
  build(path, 3, rng);
  const std::string before = io_bytes(path);
  CHECK(remove(path, "t0").appended);
  // Put back the bytes the free entry's header overwrote: the range holds
  // t0's old entries again, which the central directory no longer lists.
  std::string now = io_bytes(path);
  const std::size_t at = now.find(".modelzip-free/");
  REQUIRE(at != std::string::npos);
  const std::size_t start = at - 30;
  now.replace(start, 64, before, start, 64);
  write_file(path, now);
  CHECK(walk_local_headers(path).at(1).starts_with("t0/"));
  CHECK(add_small(path, "t3", rng).appended);
  check_streaming_view(path, 1);
}

TEST_CASE(
    "Gaps another tool left (no local header) are not overwritten: the archive is rewritten") {
  TempDir dir;
  const auto path = dir / "m.zip";
  std::mt19937_64 rng(9);
  build(path, 3, rng);
  CHECK(remove(path, "t0").appended);
  std::string now = io_bytes(path);
  const std::size_t at = now.find(".modelzip-free/") - 30;
  now.replace(at, 4, "JUNK");
  write_file(path, now);
  CHECK_FALSE(add_small(path, "t3", rng).appended);
  check_streaming_view(path, 0);
}

TEST_CASE("A tag cannot contain '/', and the error says why") {
  TempDir dir;
  Writer w = Writer::open(dir / "m.zip");
  try {
    w.add_tag("run1/step-5", NewTag{});
    FAIL("accepted a tag with '/'");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    CHECK(std::string(e.what()).find("separates") != std::string::npos);
    CHECK(std::string(e.what()).find("run1.step-5") != std::string::npos);
  }
  CHECK_THROWS_AS(w.replace_tag("a/b", NewTag{}), Error);
}

TEST_CASE("A reader that opened the archive before an in-place removal keeps its views and reads") {
  // The free entry's header (30 bytes + ".modelzip-free/<offset>") goes over
  // the first freed entry's local header; tag a's params.txt is given a
  // local header shorter than that, so the header runs into its data.
  TempDir dir;
  const auto path = dir / "m.zip";
  std::mt19937_64 rng(7);
  const Tensor w0 = random_tensor(rng, 256), w1 = random_tensor(rng, 1000);
  std::uint64_t freed_at = 0;
  std::size_t over = 0;  // bytes of a/params.txt's data under the free entry's header
  for (std::size_t pad = 0; pad < 64 && over == 0; ++pad) {
    fs::remove(path);
    Writer w = Writer::open(path, WriterOptions{.durable = false});
    w.add_tag("z", tag_with(random_tensor(rng, 1000 + pad)));
    w.commit();
    w.add_tag("a", [&] {
      NewTag nt;
      nt.add("w0", w0);
      nt.add("w1", w1);
      return nt;
    }());
    w.commit();
    const std::string bytes = io_bytes(path);
    Archive a = Archive::open(path);
    for (const auto& e : Archive::Impl::of(a).directory.entries)
      if (e.name == "a/params.txt") {
        freed_at = e.local_header_offset;
        const std::size_t local = 30 + le16(bytes, freed_at + 26) + le16(bytes, freed_at + 28);
        const std::size_t free_header =
            30 + std::string(".modelzip-free/").size() + std::to_string(freed_at).size();
        over = free_header > local ? free_header - local : 0;
      }
  }
  REQUIRE(over > 0);
  {
    Writer w = Writer::open(path, WriterOptions{.durable = false});
    w.add_tag("b", tag_with(random_tensor(rng, kBig)));  // live bytes: the removal stays in place
    w.commit();
  }
  Archive old = Archive::open(path);
  const Tensor view = old.tensor("w0", "a");  // zero-copy, handed out before the removal
  const std::string before = io_bytes(path);
  CHECK(remove(path, "a").appended);
  const std::string after = io_bytes(path);

  // The only bytes before the old tail that changed: the free entry's header.
  std::vector<std::size_t> changed;
  for (std::size_t i = 0; i < std::min(before.size(), after.size()); ++i)
    if (before[i] != after[i] && i < freed_at + 256) changed.push_back(i);
  REQUIRE(!changed.empty());
  CHECK(changed.front() >= freed_at);
  CHECK(changed.back() < freed_at + 85);

  // Views handed out and every read of the removed tag: unchanged.
  CHECK(bytes_of_tensor(view) == bytes_of_tensor(w0));
  CHECK(bytes_of_tensor(old.tensor("w0", "a")) == bytes_of_tensor(w0));
  CHECK(bytes_of_tensor(old.tensor("w1", "a")) == bytes_of_tensor(w1));
  CHECK(bytes_of_tensor(old.tensor("w1", "a", ReadMode::copy)) == bytes_of_tensor(w1));
  CHECK(old.tags() == std::vector<std::string>{"z", "a", "b"});
  // verify() reads every entry again: the removed tag's params.txt (parsed at
  // open, so no read uses these bytes) no longer matches its CRC, and the
  // file changed since `old` opened it: reported as that, not as damage.
  const Problem problem = check_changed_since_open(old, "a/params.txt");
  CHECK(problem.message.find("reopen the archive") != std::string::npos);
  CHECK(problem.message.find("damaged") == std::string::npos);
  // The archive itself is sound.
  CHECK(Archive::open(path).verify().empty());
}

TEST_CASE("A read whose bytes changed since the reader opened says so; damage is still damage") {
  // Another writer's commit may overwrite bytes an open Archive reads later
  // (in an archive of another writer, the first bytes of a removed tag's
  // blob, where the free entry's header goes). Here tag t0 is removed in
  // place and the test overwrites its blob's first data bytes, as such a
  // commit would: after the open, it is a change; before, damage. A commit
  // that leaves the entry where it was (an append) is no excuse: a mismatch
  // in it is damage.
  TempDir dir;
  const auto path = dir / "m.zip";
  std::mt19937_64 rng(12);
  build(path, 2, rng);
  const std::string sound = io_bytes(path);
  std::uint64_t data_at = 0;
  {
    const Archive reader = Archive::open(path);
    for (const auto& e : Archive::Impl::of(reader).directory.entries)
      if (e.name == "t0/params/0.fb")
        data_at = e.local_header_offset + 30 + le16(sound, e.local_header_offset + 26) +
                  le16(sound, e.local_header_offset + 28);
  }
  REQUIRE(data_at > 0);
  auto overwrite_in_place = [&] {  // the same file (inode), as a commit in place writes
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(data_at));
    f.write("\xff\xff\xff\xff\xff\xff\xff\xff", 8);
  };

  {  // Removed and overwritten after the open: every read that finds it says so, naming the entry.
    Archive stale = Archive::open(path);
    const TensorStream stream(stale, "w", "t0");  // cat, export: header read before
    CHECK(remove(path, "t0").appended);
    overwrite_in_place();
    auto check_changed = [&](auto&& read) {
      const Error e = expect_error(read, ErrorCode::io, kChangedByAnother);
      CHECK(e.message().find("reopen the archive") != std::string::npos);
      CHECK(e.context().archive == path.string());
      CHECK(e.context().entry == "t0/params/0.fb");
      CHECK(e.context().tag == "t0");
    };
    check_changed([&] { (void)stale.tensor("w", "t0"); });
    check_changed([&] { (void)stale.tensor("w", "t0", ReadMode::copy); });
    check_changed([&] { (void)stale.params("t0"); });
    check_changed([&] { (void)stale.load("t0", {.mode = ReadMode::copy}); });
    check_changed([&] { (void)stale.load("t0", {.mode = ReadMode::private_view}); });
    check_changed([&] { stream.check(); });
    check_changed([&] { stream.write_values([](std::span<const std::byte>) {}); });
    for (const int way : {0, 1, 2}) {  // entries by name: no tag to name
      INFO("entry, entry_part, EntryStream: " << way);
      const std::string name = "t0/params/0.fb";
      const Error e = expect_error(
          [&] {
            if (way == 2) {
              EntryStream entry = EntryStream::open(stale, name);
              std::vector<std::byte> buffer(stale.entry_size(name));
              (void)entry.read(buffer);
            } else {
              (void)(way == 1 ? stale.entry_part(name, 0, stale.entry_size(name))
                              : stale.entry(name, ReadMode::copy));
            }
          },
          ErrorCode::io, kChangedByAnother);
      CHECK(e.context().entry == name);
    }
    check_changed_since_open(stale, "t0/params/0.fb");
    CHECK(bytes_of_tensor(stale.tensor("w", "t1")) ==
          bytes_of_tensor(Archive::open(path).tensor("w", "t1")));
  }
  write_file(path, sound);  // a new file's bytes: reopened, sound
  {                         // Damaged after an append that left the entry in place: damage.
    Archive reader = Archive::open(path);
    add_small(path, "t2", rng);
    overwrite_in_place();
    CHECK(reader.changed_since_open());
    const Error crc = expect_error([&] { (void)reader.tensor("w", "t0", ReadMode::copy); },
                                   ErrorCode::corrupt, "CRC-32 mismatch");
    CHECK(crc.context().entry == "t0/params/0.fb");
    try {
      (void)reader.entry_part("t0/params/0.fb", 0, reader.entry_size("t0/params/0.fb"));
      FAIL("no error for a damaged blob");
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(e.code() == ErrorCode::corrupt);
    }
    for (const Problem& p : check_damaged(reader, "t0/params/0.fb"))
      CHECK(p.message.find(kChangedByAnother) == std::string::npos);
    CHECK(bytes_of_tensor(reader.tensor("w", "t1", ReadMode::copy)) ==
          bytes_of_tensor(Archive::open(path).tensor("w", "t1")));
  }
  {  // Damaged before the open: damage, in reads and in verify.
    Archive damaged = Archive::open(path);
    const Error crc = expect_error([&] { (void)damaged.tensor("w", "t0", ReadMode::copy); },
                                   ErrorCode::corrupt, "CRC-32 mismatch");
    CHECK(crc.context().entry == "t0/params/0.fb");
    try {
      (void)damaged.tensor("w", "t0");
      FAIL("no error for a damaged blob header");
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(e.code() != ErrorCode::io);
      CHECK(e.message().find(kChangedByAnother) == std::string::npos);
    }
    check_damaged(damaged, "t0/params/0.fb");
  }
  write_file(path, sound);
  CHECK(Archive::open(path).verify().empty());
}

TEST_CASE("changed_since_open tells whether a reader is still the archive; reopen opens it now") {
  TempDir dir;
  const auto path = dir / "m.zip";
  std::mt19937_64 rng(21);
  build(path, 3, rng);
  const std::vector<std::string> three{"t0", "t1", "t2"};

  Archive a = Archive::open(path);
  CHECK_FALSE(a.changed_since_open());
  CHECK_FALSE(a.changed_since_open());  // asking changes nothing
  CHECK(Archive::open(path).verify().empty());
  CHECK_FALSE(a.changed_since_open());  // nor does another reader

  SUBCASE("an append") {
    CHECK(add_small(path, "t3", rng).appended);
    CHECK(a.changed_since_open());
    CHECK(a.tags() == three);  // still the archive as it was
    const Archive now = a.reopen();
    CHECK(now.tags() == std::vector<std::string>{"t0", "t1", "t2", "t3"});
    CHECK_FALSE(now.changed_since_open());
    CHECK(a.changed_since_open());
  }
  SUBCASE("an in-place removal") {
    CHECK(remove(path, "t0").appended);
    CHECK(a.changed_since_open());
    CHECK(a.reopen().tags() == std::vector<std::string>{"t1", "t2"});
  }
  SUBCASE("a rewrite") {
    Writer w = Writer::open(path, WriterOptions{.append = false});
    w.remove_tag("t1");
    w.commit();
    CHECK_FALSE(w.last_stats().appended);
    CHECK(a.changed_since_open());
    CHECK(a.reopen().tags() == std::vector<std::string>{"t0", "t2"});
    CHECK(a.tags() == three);
  }
  SUBCASE("the file removed") {
    fs::remove(path);
    CHECK(a.changed_since_open());
    CHECK_THROWS_AS((void)a.reopen(), Error);
  }
  // Before: true in the three cases below, which change the file's times or
  // its journal but not the committed archive (its tail is compared).
  SUBCASE("a touch") {
    const struct timespec times[2] = {{0, UTIME_OMIT}, {1234567, 0}};
    REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
    CHECK_FALSE(a.changed_since_open());
    CHECK_FALSE(a.changed_since_open());  // the state it found is the one checked now
    CHECK(add_small(path, "t3", rng).appended);
    CHECK(a.changed_since_open());
  }
  SUBCASE("an append in flight, then committed; an append rolled back") {
    const std::string old = io_bytes(path);
    const std::uint64_t tail = Archive::Impl::of(a).snapshot_file.stable_prefix;
    CHECK(add_small(path, "t3", rng).appended);
    // The append's journal still there: the committed archive is the old one.
    const io::AppendJournal journal{11, tail, old.size(),
                                    Bytes::copy_of(std::string_view(old).substr(tail))};
    io::write_append_journal(path, journal, false);
    CHECK_FALSE(a.changed_since_open());
    io::remove_append_journal(path, false);  // the commit point
    CHECK(a.changed_since_open());
    // Rolled back (the old tail and size restored, a new modification time).
    write_file(path, old);
    const struct timespec times[2] = {{0, UTIME_OMIT}, {7654321, 0}};
    REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
    CHECK_FALSE(a.changed_since_open());
    CHECK(a.reopen().tags() == three);
  }
  SUBCASE("the options of the open") {
    OpenOptions roomy;
    roomy.limits.max_text_entry_bytes = 1 << 20;
    const Archive b = Archive::open(path, roomy);
    CHECK(Archive::Impl::of(b.reopen()).limits.max_text_entry_bytes == 1 << 20);
  }
  SUBCASE("an archive in memory") {
    const Archive m = Archive::from_memory(Bytes::copy_of(io_bytes(path)), "m");
    add_small(path, "t3", rng);
    CHECK_FALSE(m.changed_since_open());
    CHECK(m.reopen().tags() == three);
  }
}
