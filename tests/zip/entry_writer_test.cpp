// zip::EntryWriter, zip::StreamZipWriter over io::FileSink: stored data at
// 64-byte aligned offsets whatever the name length, the padding repeated
// in the central record (FORMAT.md section 1), entries made of several
// pieces, raw copies of deflated entries, deterministic output; entries
// written piece by piece from several threads in any order and finished
// with their CRC give the bytes StreamZipWriter gives; io::FileSink's keep;
// other zip tools accept the archives.
#include <doctest/doctest.h>

#include <thread>

#include "core/crc32.hpp"
#include "expect_error.hpp"
#include "io/durable_file.hpp"
#include "io/file_sink.hpp"
#include "io/mapped_file.hpp"
#include "modelzip/error.hpp"
#include "test_support.hpp"
#include "zip/entry_writer.hpp"
#include "zip/zip_directory.hpp"
#include "zip/zip_reader.hpp"
#include "zip/zip_stream_writer.hpp"
#include "zip_builder.hpp"
#include "zip_structure.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

std::string pattern(std::size_t n, int seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 31 + seed + i / 7) & 0xFF);
  return s;
}

std::string text(const Bytes& b) {
  return std::string(b.as_string_view());
}

// Writes a zip at `path` with `add` and returns its bytes.
template <class F>
std::string write_zip(const std::filesystem::path& path, F&& add) {
  {
    io::OutputFile out(path);
    modelzip::zip::StreamZipWriter w(out.fd(), path.string(), 0);
    add(w);
    w.finish();
  }
  return io_bytes(path);
}

}  // namespace

TEST_CASE("Every stored entry is 64-byte aligned, for name lengths 1 to 130") {
  TempDir dir;
  auto path = dir / "aligned.zip";
  std::vector<std::pair<std::string, std::string>> expected;
  const std::string file = write_zip(path, [&](modelzip::zip::StreamZipWriter& w) {
    for (int len = 1; len <= 130; ++len) {
      std::string name(static_cast<std::size_t>(len), 'n');
      name[0] = static_cast<char>('a' + len % 26);
      name += std::to_string(len);
      std::string data = pattern(static_cast<std::size_t>(len * 3 + 1), len);
      w.add_stored(name, {Bytes::copy_of(data)});
      expected.emplace_back(name, data);
    }
    w.add_deflated("deflated.bin", {Bytes::copy_of(pattern(5000, 9))});
  });
  check_zip_structure(path);
  Bytes mapped = io::map_file(path);
  modelzip::zip::Directory d = modelzip::zip::parse_directory(mapped.span(), Limits{});
  REQUIRE(d.entries.size() == expected.size() + 1);
  modelzip::zip::EntryReader reader(mapped, Limits{});
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& e = d.entries[i];
    INFO("entry " << e.name);
    CHECK(e.name == expected[i].first);
    CHECK(e.stored());
    CHECK(text(reader.read(e, true)) == expected[i].second);
  }
  // The central record repeats the local padding field (same length), so
  // that tools that compute an entry's end from the central lengths agree.
  for (std::size_t i = 0, p = d.central_directory_offset; i < d.entries.size(); ++i) {
    const auto& e = d.entries[i];
    const std::uint64_t n = get16(file, p + 28), x = get16(file, p + 30), m = get16(file, p + 32);
    CHECK(x == get16(file, e.local_header_offset + 28));
    p += 46 + n + x + m;
  }
  const auto& last = d.entries.back();
  CHECK(last.method == modelzip::zip::kMethodDeflate);
  CHECK(last.compressed_size < 5000);
  CHECK(text(reader.read(last, true)) == pattern(5000, 9));
}

TEST_CASE("An entry is the concatenation of its pieces (empty pieces included)") {
  TempDir dir;
  auto path = dir / "pieces.zip";
  std::string a = pattern(1000, 1), b = pattern(3, 2), c = pattern(300000, 3);
  write_zip(path, [&](modelzip::zip::StreamZipWriter& w) {
    w.add_stored("s", {Bytes::copy_of(a), Bytes(), Bytes::copy_of(b), Bytes::copy_of(c)});
    w.add_stored("empty", {});
    w.add_deflated("d", {Bytes::copy_of(c), Bytes(), Bytes::copy_of(a)});
  });
  check_zip_structure(path);
  Bytes mapped = io::map_file(path);
  modelzip::zip::Directory d = modelzip::zip::parse_directory(mapped.span(), Limits{});
  modelzip::zip::EntryReader r(mapped, Limits{});
  REQUIRE(d.entries.size() == 3);
  CHECK(text(r.read(d.entries[0], true)) == a + b + c);
  CHECK(r.read(d.entries[1], true).empty());
  CHECK(text(r.read(d.entries[2], true)) == c + a);
  CHECK(d.entries[2].crc32 == crc32_of(c + a));
}

TEST_CASE("Raw copies keep the compressed bytes of the source unchanged") {
  TempDir dir;
  std::string content = pattern(50000, 4);
  ZipSpec spec;
  spec.entries.push_back(deflated("src/x.bin", content));
  BuiltZip src = build_zip(spec);
  Bytes src_bytes = Bytes::copy_of(src.bytes);
  modelzip::zip::Directory sd = modelzip::zip::parse_directory(src_bytes.span(), Limits{});
  auto path = dir / "copy.zip";
  write_zip(path, [&](modelzip::zip::StreamZipWriter& w) {
    w.add_stored("first", {Bytes::copy_of(std::string("1"))});
    const auto& s = sd.entries[0];
    w.add_raw("renamed.bin", s, src_bytes.slice(src.data_offsets[0], s.compressed_size));
  });
  check_zip_structure(path);
  Bytes mapped = io::map_file(path);
  modelzip::zip::Directory d = modelzip::zip::parse_directory(mapped.span(), Limits{});
  REQUIRE(d.entries.size() == 2);
  const auto& e = d.entries[1];
  CHECK(e.name == "renamed.bin");
  CHECK(e.crc32 == sd.entries[0].crc32);
  CHECK(e.compressed_size == sd.entries[0].compressed_size);
  CHECK(mapped.as_string_view().substr(e.data_offset, e.compressed_size) ==
        std::string_view(src.bytes).substr(src.data_offsets[0], e.compressed_size));
  CHECK(text(modelzip::zip::EntryReader(mapped, Limits{}).read(e, true)) == content);
}

TEST_CASE("The same entries give the same bytes (fixed times, fixed order)") {
  TempDir dir;
  auto write = [&](const std::string& name) {
    return write_zip(dir / name, [&](modelzip::zip::StreamZipWriter& w) {
      w.add_stored("b", {Bytes::copy_of(pattern(100, 1))});
      w.add_deflated("c", {Bytes::copy_of(pattern(1000, 2))});
      w.add_stored("a", {Bytes::copy_of(pattern(10, 3))});
    });
  };
  std::string one = write("1.zip"), two = write("2.zip");
  CHECK(one.size() > 0);
  CHECK(one == two);
  Bytes b = Bytes::copy_of(one);
  modelzip::zip::Directory d = modelzip::zip::parse_directory(b.span(), Limits{});
  REQUIRE(d.entries.size() == 3);
  CHECK(d.entries[0].name == "b");
  CHECK(d.entries[1].name == "c");
  CHECK(d.entries[2].name == "a");
}

TEST_CASE(
    "Entries written in pieces from several threads, finished with their CRC, "
    "equal StreamZipWriter's bytes") {
  TempDir dir;
  // Sizes on both sides of the inline threshold and of 4 GiB's ZIP64 rule's
  // neighbourhood in names: ASCII and UTF-8.
  const std::vector<std::pair<std::string, std::string>> entries = {
      {"small", pattern(100, 1)},
      {"gr\xc3\xb6\xc3\x9f"
       "e",
       pattern(700000, 2)},
      {"empty", ""},
      {std::string(90, 'n'), pattern(5 << 20, 3)},
  };
  const std::string reference = write_zip(dir / "ref.zip", [&](auto& w) {
    for (const auto& [name, content] : entries) w.add_stored(name, {Bytes::copy_of(content)});
  });
  const auto path = dir / "pieces.zip";
  {
    io::OutputFile out(path);
    io::FileSink sink(out.fd(), ErrorContext{.archive = path.string()}, false);
    std::vector<modelzip::zip::EntryWriter> writers;
    std::uint64_t at = 0;
    for (const auto& [name, content] : entries) {
      writers.emplace_back(sink, modelzip::zip::plan_stored(name, at, content.size()));
      at = writers.back().plan().end();
    }
    // Each entry cut into 7 pieces, written backwards, two threads.
    auto write_half = [&](std::size_t parity) {
      for (std::size_t i = entries.size(); i-- > 0;) {
        const std::string& content = entries[i].second;
        const std::size_t step = content.size() / 7 + 1;
        for (std::size_t k = 7; k-- > 0;) {
          if (k % 2 != parity) continue;
          const std::size_t from = std::min(content.size(), k * step);
          const std::size_t to = std::min(content.size(), from + step);
          writers[i].write(from, Bytes::copy_of(std::string_view(content).substr(from, to - from)));
        }
      }
    };
    std::thread other(write_half, 1);
    write_half(0);
    other.join();
    modelzip::zip::StreamZipWriter w(sink, path.string(), at);
    for (std::size_t i = 0; i < entries.size(); ++i)
      w.keep(writers[i].finish(crc32_of(entries[i].second)));
    w.finish();
  }
  CHECK(io_bytes(path) == reference);
  check_zip_structure(path);
}

TEST_CASE("EntryPlan: headers and records as the reader parses them") {
  TempDir dir;
  const auto path = dir / "one.zip";
  const std::string content = pattern(1000, 7);
  write_zip(path, [&](auto& w) {
    w.add_stored("x", {Bytes::copy_of(pattern(3, 1))});
    w.add_stored("caf\xc3\xa9.bin", {Bytes::copy_of(content)});
  });
  Bytes mapped = io::map_file(path);
  const auto d = modelzip::zip::parse_directory(mapped.span(), Limits{});
  REQUIRE(d.entries.size() == 2);
  const auto& e = d.entries[1];
  const auto plan = modelzip::zip::plan_stored(e.name, e.local_header_offset, content.size());
  CHECK(plan.flags == 0x0800);
  CHECK(plan.data_offset == e.data_offset);
  CHECK(plan.data_offset % 64 == 0);
  const auto info = plan.info(crc32_of(content));
  CHECK(info.crc32 == e.crc32);
  CHECK(info.flags == e.flags);
  CHECK(info.compressed_size == e.compressed_size);
  CHECK(info.local_header_offset == e.local_header_offset);
  const auto header = plan.local_header(crc32_of(content));
  CHECK(mapped.as_string_view().substr(e.local_header_offset, header.size()) ==
        std::string_view(reinterpret_cast<const char*>(header.data()), header.size()));
  // Copies keep the method, CRC and sizes; stored ones are aligned.
  const auto copy = modelzip::zip::plan_copy("y", e, 1);
  CHECK(copy.data_offset % 64 == 0);
  CHECK(copy.flags == 0x0800);
  CHECK(copy.compressed == e.compressed_size);
  CHECK_ERROR(modelzip::zip::plan_stored(std::string(70000, 'n'), 0, 1),
              ErrorCode::invalid_argument, "longer than 65535");
  io::FileSink sink(-1, {}, false);
  CHECK_ERROR(modelzip::zip::write_entry(sink, plan, 0, std::span<const std::byte>()),
              ErrorCode::invalid_argument, "for a plan of 1000");
}

TEST_CASE("FileSink: keep in place does nothing, a moved range copies the existing archive") {
  TempDir dir;
  const auto path = dir / "f.bin";
  io::OutputFile out(path);
  const Bytes existing = Bytes::copy_of(std::string("0123456789"));
  io::FileSink sink(out.fd(), ErrorContext{.archive = path.string()}, false, existing);
  sink.write_copy(0, std::as_bytes(std::span(std::string_view("ab"))));
  sink.keep(io::ByteRange{2, 3});     // in place: not written
  sink.keep(5, io::ByteRange{7, 3});  // "789" moved to 5
  CHECK_ERROR(sink.keep(3, io::ByteRange{8, 5}), ErrorCode::invalid_argument,
              "not in the existing");
  sink.set_end(9);
  sink.finish();
  sink.commit();
  CHECK(io_bytes(path) == std::string("ab\0\0\0"
                                      "789\0",
                                      9));
}

TEST_CASE("unzip accepts the archives (padding extra fields included)") {
  if (std::system("command -v unzip >/dev/null 2>&1") != 0)
    FAIL("unzip is not installed (tests need it: see .ci/install-deps)");
  TempDir dir;
  auto path = dir / "t.zip";
  write_zip(path, [&](auto& w) {
    for (int i = 1; i < 70; ++i)
      w.add_stored(std::string(static_cast<std::size_t>(i), 'x') + ".bin",
                   {Bytes::copy_of(pattern(static_cast<std::size_t>(i) * 11, i))});
    w.add_deflated("d.txt", {Bytes::copy_of(pattern(10000, 1))});
  });
  std::string cmd = "unzip -tqq '" + path.string() + "' >/dev/null 2>&1";
  CHECK(std::system(cmd.c_str()) == 0);
}
