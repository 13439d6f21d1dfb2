// modelzip::zip::EntryReader: stored entries are zero-copy slices,
// deflated entries are inflated and checked, lies about sizes and CRCs give
// Error(corrupt) naming the entry.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

#include "expect_error.hpp"
#include "io/byte_source.hpp"
#include "modelzip/error.hpp"
#include "zip/zip_directory.hpp"
#include "zip/zip_reader.hpp"
#include "zip_builder.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

struct Opened {
  Bytes file;
  modelzip::zip::Directory dir;
  modelzip::zip::EntryReader reader;
  explicit Opened(const std::string& bytes)
      : file(Bytes::copy_of(bytes)),
        dir(modelzip::zip::parse_directory(file.span(), Limits{})),
        reader(file, Limits{}) {}
  const modelzip::zip::EntryInfo& entry(const std::string& name) const {
    for (const auto& e : dir.entries)
      if (e.name == name) return e;
    throw std::runtime_error("no entry " + name);
  }
};

std::string text(const Bytes& b) {
  return std::string(b.as_string_view());
}

std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 7 + i / 13) & 0xFF);
  return s;
}

}  // namespace

TEST_CASE("Stored entries: zero-copy slices of the file, CRC checked on request") {
  ZipSpec spec;
  spec.entries.push_back(stored("a", "hello"));
  spec.entries.push_back(stored("empty", ""));
  Opened z(build_zip(spec).bytes);
  Bytes a = z.reader.read(z.entry("a"), true);
  CHECK(text(a) == "hello");
  CHECK(a.data() == z.file.data() + z.entry("a").data_offset);  // no copy
  CHECK(z.reader.read(z.entry("empty"), true).empty());
  CHECK(text(z.reader.read_prefix(z.entry("a"), 3)) == "hel");
  CHECK(text(z.reader.read_prefix(z.entry("a"), 100)) == "hello");  // clamped to the entry
}

TEST_CASE("Stored entries: a CRC mismatch is found only when checking") {
  ZipSpec spec;
  auto e = stored("a", "hello");
  e.crc = 0x12345678u;
  spec.entries.push_back(e);
  Opened z(build_zip(spec).bytes);
  CHECK(text(z.reader.read(z.entry("a"), false)) == "hello");
  REQUIRE_ERROR_AS(err, z.reader.read(z.entry("a"), true), ErrorCode::corrupt, "CRC-32 mismatch");
  CHECK(err.context().entry == "a");
}

TEST_CASE("Deflated entries: inflated, CRC-checked, prefixes") {
  std::string big = pattern(300000);
  ZipSpec spec;
  spec.entries.push_back(deflated("d", big));
  spec.entries.push_back(deflated("empty", ""));
  Opened z(build_zip(spec).bytes);
  Bytes d = z.reader.read(z.entry("d"), true);
  CHECK(text(d) == big);
  CHECK_FALSE(d.is_mapped());
  CHECK(text(z.reader.read_prefix(z.entry("d"), 1000)) == big.substr(0, 1000));
  CHECK(text(z.reader.read_prefix(z.entry("d"), 1u << 30)) == big);
  CHECK(z.reader.read(z.entry("empty"), true).empty());
}

TEST_CASE("Deflated entries: wrong CRC, lying sizes and damaged streams are corrupt") {
  const std::string content = pattern(5000);
  SUBCASE("wrong CRC") {
    ZipSpec spec;
    auto e = deflated("d", content);
    e.crc = 1;
    spec.entries.push_back(e);
    Opened z(build_zip(spec).bytes);
    REQUIRE_ERROR_AS(err, z.reader.read(z.entry("d"), false), ErrorCode::corrupt, "");
    CHECK(err.context().entry == "d");
  }
  SUBCASE("declares fewer bytes than the stream holds") {
    ZipSpec spec;
    auto e = deflated("d", content);
    e.uncompressed_size = 4000;
    spec.entries.push_back(e);
    Opened z(build_zip(spec).bytes);
    CHECK_ERROR(z.reader.read(z.entry("d"), true), ErrorCode::corrupt, "");
    // A prefix that stops early never looks at the end.
    CHECK(text(z.reader.read_prefix(z.entry("d"), 100)) == content.substr(0, 100));
  }
  SUBCASE("declares more bytes than the stream holds") {
    ZipSpec spec;
    auto e = deflated("d", content);
    e.uncompressed_size = 6000;
    spec.entries.push_back(e);
    Opened z(build_zip(spec).bytes);
    REQUIRE_ERROR_AS(err, z.reader.read(z.entry("d"), true), ErrorCode::corrupt, "");
    CHECK(err.context().entry == "d");
  }
  SUBCASE("garbage instead of a deflate stream") {
    ZipSpec spec;
    auto e = deflated("d", content);
    std::string junk(200, '\xFF');
    e.raw_data = junk;
    spec.entries.push_back(e);
    Opened z(build_zip(spec).bytes);
    REQUIRE_ERROR_AS(err, z.reader.read(z.entry("d"), true), ErrorCode::corrupt, "");
    CHECK(err.context().entry == "d");
  }
  SUBCASE("a truncated deflate stream") {
    ZipSpec spec;
    auto e = deflated("d", content);
    e.raw_data = deflate_raw(content).substr(0, 100);
    spec.entries.push_back(e);
    Opened z(build_zip(spec).bytes);
    CHECK_ERROR(z.reader.read(z.entry("d"), true), ErrorCode::corrupt, "");
  }
}

TEST_CASE("Entries found by both parsers: data descriptors, ZIP64, comments") {
  std::string content = pattern(20000);
  ZipSpec spec;
  auto a = deflated("dd", content);
  a.data_descriptor = true;
  auto b = deflated("z64", content);
  b.zip64 = true;
  auto c = stored("s", content);
  c.data_descriptor = true;
  spec.entries = {a, b, c};
  spec.zip64_end = true;
  spec.comment = "comment";
  Opened z(build_zip(spec).bytes);
  CHECK(text(z.reader.read(z.entry("dd"), true)) == content);
  CHECK(text(z.reader.read(z.entry("z64"), true)) == content);
  CHECK(text(z.reader.read(z.entry("s"), true)) == content);
}

TEST_CASE(
    "libzip inflates entries of the zips FORMAT.md section 1 accepts beyond APPNOTE's plain form") {
  // Deflated entries are read through libzip, which parses the end records
  // on its own: it must agree on ZIP64 records beside real 32-bit values
  // (Python's zipfile), a comment and trailing bytes.
  const std::string content = pattern(30000);
  for (int variant = 0; variant < 3; ++variant) {
    INFO("variant " << variant);
    ZipSpec spec;
    spec.entries = {deflated("a", content), stored("b", "plain")};
    spec.zip64_end = variant != 1;
    spec.zip64_real_32bit = variant != 1;
    spec.comment = variant >= 1 ? "a comment" : "";
    spec.trailing = variant >= 1 ? "\n" : "";
    Opened z(build_zip(spec).bytes);
    CHECK(text(z.reader.read(z.entry("a"), true)) == content);
    CHECK(text(z.reader.read_owned(z.entry("a"))) == content);
    CHECK(text(z.reader.read(z.entry("b"), true)) == "plain");
  }
}

TEST_CASE("Concurrent reads of one EntryReader from several threads") {
  std::string content = pattern(100000);
  ZipSpec spec;
  for (int i = 0; i < 8; ++i) {
    spec.entries.push_back(deflated("d" + std::to_string(i), content.substr(i * 1000)));
    spec.entries.push_back(stored("s" + std::to_string(i), content.substr(i * 500)));
  }
  Opened z(build_zip(spec).bytes);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round)
        for (int i = 0; i < 8; ++i) {
          int k = (i + t + round) % 8;
          if (text(z.reader.read(z.entry("d" + std::to_string(k)), true)) !=
              content.substr(k * 1000))
            ++bad;
          if (text(z.reader.read(z.entry("s" + std::to_string(k)), true)) !=
              content.substr(k * 500))
            ++bad;
        }
    });
  for (auto& t : threads) t.join();
  CHECK(bad == 0);
}

TEST_CASE("read_owned_all: owned copies of many entries, stored and deflated, in order") {
  // Large enough for two threads and several jobs per entry (jobs of 4 MiB).
  const std::string big = pattern((9u << 20) + 12345), mid = pattern(3u << 20);
  ZipSpec spec;
  spec.entries.push_back(stored("big", big));
  spec.entries.push_back(deflated("d", pattern(70000)));
  spec.entries.push_back(stored("empty", ""));
  spec.entries.push_back(stored("small", "hello"));
  spec.entries.push_back(stored("mid", mid));
  spec.entries.push_back(stored("big2", big));
  Opened z(build_zip(spec).bytes);
  std::vector<const modelzip::zip::EntryInfo*> entries;
  for (const auto& e : z.dir.entries) entries.push_back(&e);

  std::vector<std::pair<std::uint64_t, std::uint64_t>> reports;
  auto out = z.reader.read_owned_all(entries, [&](const Progress& p) {
    reports.emplace_back(p.bytes_done, p.bytes_total);
    return true;
  });
  REQUIRE(out.size() == entries.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    CHECK_FALSE(out[i].is_mapped());
    CHECK(text(out[i]) == text(z.reader.read(*entries[i], true)));
    if (entries[i]->stored() && entries[i]->compressed_size > 0)
      CHECK(out[i].data() != z.file.data() + entries[i]->data_offset);  // a copy
  }
  // One report per entry, in order, ending at the total.
  REQUIRE(reports.size() == entries.size());
  std::uint64_t expect = 0, total = 0;
  for (const auto* e : entries) total += e->compressed_size;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    expect += entries[i]->compressed_size;
    CHECK(reports[i].first == expect);
    CHECK(reports[i].second == total);
  }
  CHECK(z.reader.read_owned_all({}).empty());
  // Nothing to read still reports its end, once.
  reports.clear();
  CHECK(z.reader
            .read_owned_all({},
                            [&](const Progress& p) {
                              reports.emplace_back(p.bytes_done, p.bytes_total);
                              return true;
                            })
            .empty());
  CHECK(reports == std::vector<std::pair<std::uint64_t, std::uint64_t>>{{0, 0}});
}

TEST_CASE("read_owned_all: a damaged stored entry anywhere is a CRC mismatch naming it") {
  const std::string big = pattern((9u << 20) + 100), small = pattern(5000);
  for (std::size_t flip :
       {std::size_t{0}, std::size_t{4u << 20}, (std::size_t{8} << 20) + 99, big.size() - 1}) {
    CAPTURE(flip);
    std::string damaged = big;
    damaged[flip] = static_cast<char>(damaged[flip] ^ 0x5A);
    ZipSpec spec;
    spec.entries.push_back(stored("first", big));
    spec.entries.push_back(stored("small", small));
    auto bad = stored("bad", damaged);
    bad.crc = crc32_of(big);  // the CRC of the undamaged data
    spec.entries.push_back(bad);
    spec.entries.push_back(stored("last", big));
    Opened z(build_zip(spec).bytes);
    std::vector<const modelzip::zip::EntryInfo*> entries;
    for (const auto& e : z.dir.entries) entries.push_back(&e);
    int reports = 0;
    REQUIRE_ERROR_AS(err,
                     z.reader.read_owned_all(entries,
                                             [&](const Progress&) {
                                               ++reports;
                                               return true;
                                             }),
                     ErrorCode::corrupt, "CRC-32 mismatch");
    CHECK(err.context().entry == "bad");
    CHECK(reports == 2);  // the entries before it
    REQUIRE_ERROR_AS(one, z.reader.read_owned(z.entry("bad")), ErrorCode::corrupt,
                     "CRC-32 mismatch");
    CHECK(text(z.reader.read_owned(z.entry("last"))) == big);
  }
}

TEST_CASE("read_owned_all: cancelling stops at once and throws Error(cancelled)") {
  const std::string big = pattern(9u << 20);
  ZipSpec spec;
  for (int i = 0; i < 4; ++i) spec.entries.push_back(stored("e" + std::to_string(i), big));
  Opened z(build_zip(spec).bytes);
  std::vector<const modelzip::zip::EntryInfo*> entries;
  for (const auto& e : z.dir.entries) entries.push_back(&e);
  int calls = 0;
  REQUIRE_ERROR_AS(err,
                   z.reader.read_owned_all(entries, [&](const Progress&) { return ++calls < 2; }),
                   ErrorCode::cancelled, "cancelled");
  CHECK(calls == 2);
}

TEST_CASE("crc32_of equals zlib's crc32 for every length and alignment") {
  std::string data = pattern(1 << 20);
  for (std::size_t i = 0; i < data.size(); i += 3) data[i] = static_cast<char>(data[i] ^ (i >> 5));
  auto zlib = [](const char* p, std::size_t n) {
    return static_cast<std::uint32_t>(
        ::crc32(0L, reinterpret_cast<const Bytef*>(p), static_cast<uInt>(n)));
  };
  for (std::size_t offset = 0; offset < 17; ++offset)
    for (std::size_t n = 0; n < 300; ++n) {
      CAPTURE(offset);
      CAPTURE(n);
      REQUIRE(modelzip::detail::crc32_of(span_of(data.substr(offset, n))) ==
              zlib(data.data() + offset, n));
    }
  for (std::size_t n :
       {std::size_t{1000}, std::size_t{4096}, std::size_t{65535}, data.size() - 5, data.size()})
    CHECK(modelzip::detail::crc32_of(span_of(data.substr(5, std::min(n, data.size() - 5)))) ==
          zlib(data.data() + 5, std::min(n, data.size() - 5)));
  std::string zeros(100000, '\0'), ones(100000, '\xFF');
  CHECK(modelzip::detail::crc32_of(span_of(zeros)) == zlib(zeros.data(), zeros.size()));
  CHECK(modelzip::detail::crc32_of(span_of(ones)) == zlib(ones.data(), ones.size()));
}

namespace {

// A ByteSource over bytes that are all there already, recording what the
// reader asks for (a remote archive's cache fetches exactly these ranges).
struct RecordingSource : io::ByteSource {
  mutable std::vector<io::ByteRange> asked;
  void ensure(std::span<const io::ByteRange> ranges) const override {
    asked.insert(asked.end(), ranges.begin(), ranges.end());
  }
  bool covers(std::uint64_t byte) const {
    return std::any_of(asked.begin(), asked.end(), [&](const io::ByteRange& r) {
      return byte >= r.offset && byte - r.offset < r.length;
    });
  }
};

}  // namespace

TEST_CASE(
    "read_range of a stored entry fetches its local header and the range, not the bytes before") {
  const std::string big = pattern(200000);
  ZipSpec spec;
  spec.entries.push_back(stored("before", "x"));
  spec.entries.push_back(stored("big", big));
  const Bytes file = Bytes::copy_of(build_zip(spec).bytes);
  auto source = std::make_shared<RecordingSource>();
  const modelzip::zip::Directory dir =
      modelzip::zip::parse_directory(file.span(), Limits{}, source.get());
  const modelzip::zip::EntryInfo& e = dir.entries.at(1);
  REQUIRE(e.name == "big");
  source->asked.clear();  // what the directory's parse read
  modelzip::zip::EntryReader reader(file, Limits{}, source);
  CHECK(text(reader.read_range(e, 150000, 100)) == big.substr(150000, 100));
  const std::uint64_t data = reader.data_offset(e);
  CHECK(source->covers(data + 150000));
  CHECK(source->covers(data + 150099));
  CHECK_FALSE(source->covers(data + 1000));  // read_prefix would have fetched from the start
  CHECK_FALSE(source->covers(data + 149999));
  CHECK(reader.read_range(e, 200000, 0).empty());
  REQUIRE_ERROR_AS(err, reader.read_range(e, 199999, 2), ErrorCode::invalid_argument, "outside");
  CHECK(err.context().entry == "big");
}
