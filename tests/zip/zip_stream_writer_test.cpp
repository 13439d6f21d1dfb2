// modelzip::zip::StreamZipWriter: entries on both sides of the inline-CRC
// threshold and across 4 MiB chunk and piece boundaries read back with their
// CRC checked; the local headers agree with the central directory (the zip
// rule when no data descriptor is used); zlib computes the expected CRCs;
// unzip accepts the result; progress and cancel.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "core/crc32.hpp"
#include "expect_error.hpp"
#include "io/mapped_file.hpp"
#include "io/syscalls.hpp"
#include "modelzip/error.hpp"
#include "test_support.hpp"
#include "zip/zip_directory.hpp"
#include "zip/zip_reader.hpp"
#include "zip/zip_stream_writer.hpp"
#include "zip_builder.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

std::string pattern(std::size_t n, int seed) {
  std::string s(n, '\0');
  std::uint32_t x = static_cast<std::uint32_t>(seed) * 2654435761u + 1;
  for (auto& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

// An open file descriptor, closed on destruction.
struct Fd {
  int fd;
  explicit Fd(const std::filesystem::path& p)
      : fd(::open(p.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) {
    REQUIRE(fd >= 0);
  }
  ~Fd() { ::close(fd); }
};

struct Expected {
  std::string name, content;
  bool deflated = false;
};

}  // namespace

TEST_CASE("Every size class reads back CRC-checked, local headers equal the central directory") {
  constexpr std::size_t kInline = 256u << 10, kMiB = 1u << 20;
  std::vector<Expected> expected = {
      {"empty", ""},
      {"one", pattern(1, 1)},
      {"inline-max", pattern(kInline, 2)},
      {"just-over", pattern(kInline + 1, 3)},
      {"chunks", pattern(9 * kMiB + 5, 4)},
      {"deflated", pattern(300000, 5) + std::string(200000, 'z'), true},
      {"after", pattern(77, 6)},
  };
  // "chunks" is given as uneven pieces (an empty one among them), so chunk
  // boundaries fall inside pieces and pieces end inside chunks.
  const std::string& big = expected[4].content;
  const std::vector<std::size_t> cuts = {0,        3 * kMiB + 7,   3 * kMiB + 7,
                                         8 * kMiB, big.size() - 1, big.size()};
  TempDir dir;
  const auto path = dir / "s.zip";
  std::uint64_t size = 0, last_done = 0, total = 0;
  {
    Fd out(path);
    modelzip::zip::StreamZipWriter w(out.fd, path.string(), 0, 0, [&](const Progress& p) {
      CHECK(p.bytes_done >= last_done);
      CHECK(p.bytes_done <= p.bytes_total);
      last_done = p.bytes_done;
      total = p.bytes_total;
      return true;
    });
    for (const auto& e : expected) {
      if (e.name == "chunks") {
        std::vector<Bytes> pieces;
        for (std::size_t i = 0; i + 1 < cuts.size(); ++i)
          pieces.push_back(
              Bytes::copy_of(std::string_view(big).substr(cuts[i], cuts[i + 1] - cuts[i])));
        w.add_stored(e.name, pieces);  // `pieces` dies before finish(): the writer keeps copies
      } else if (e.deflated) {
        w.add_deflated(e.name, {Bytes::copy_of(e.content)});
      } else {
        w.add_stored(e.name, {Bytes::copy_of(e.content)});
      }
    }
    size = w.finish();
  }
  std::uint64_t all = 0;
  for (const auto& e : expected) all += e.content.size();
  CHECK(last_done == all);
  CHECK(total == all);

  const std::string file = io_bytes(path);
  REQUIRE(file.size() == size);
  Bytes mapped = io::map_file(path);
  const modelzip::zip::Directory d = modelzip::zip::parse_directory(mapped.span(), Limits{});
  modelzip::zip::EntryReader reader(mapped, Limits{});
  REQUIRE(d.entries.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& e = d.entries[i];
    INFO("entry " << e.name);
    CHECK(e.name == expected[i].name);
    CHECK(e.crc32 == crc32_of(expected[i].content));  // zlib's
    CHECK(e.uncompressed_size == expected[i].content.size());
    CHECK(e.method ==
          (expected[i].deflated ? modelzip::zip::kMethodDeflate : modelzip::zip::kMethodStore));
    if (e.stored()) CHECK(e.data_offset % 64 == 0);
    CHECK(std::string(reader.read(e, true).as_string_view()) == expected[i].content);
    const std::size_t lh = e.local_header_offset;
    CHECK(get32(file, lh) == 0x04034b50u);
    CHECK(get32(file, lh + 14) == e.crc32);
    CHECK(get32(file, lh + 18) == e.compressed_size);
    CHECK(get32(file, lh + 22) == e.uncompressed_size);
    CHECK((get16(file, lh + 6) & 0x0008) == 0);  // no data descriptor
  }
  if (std::system("command -v unzip >/dev/null 2>&1") != 0)
    FAIL("unzip is not installed (tests need it: see .ci/install-deps)");
  const std::string cmd = "unzip -tqq '" + path.string() + "' >/dev/null 2>&1";
  CHECK(std::system(cmd.c_str()) == 0);
}

TEST_CASE("A cancel in the middle of a large entry stops the write with Error(cancelled)") {
  TempDir dir;
  const auto path = dir / "c.zip";
  const std::string big = pattern(20u << 20, 9);
  Fd out(path);
  int calls = 0;
  modelzip::zip::StreamZipWriter w(out.fd, path.string(), 0, big.size(),
                                   [&](const Progress&) { return ++calls < 3; });
  CHECK_ERROR(w.add_stored("big", {Bytes::copy_of(big)}), ErrorCode::cancelled, "save cancelled");
  CHECK(calls == 3);
  // The writer (and its CRC worker, holding the entry's bytes) is destroyed
  // here; sanitizers check that nothing is read afterwards.
}

namespace {

// Runs a shell command; its exit status and standard output.
std::pair<int, std::string> shell(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace

TEST_CASE("Entries past 4 GiB (ZIP64 offsets): zipinfo, unzip and Python's zipfile accept them") {
  // A sparse file: its first two entries are 4 GiB + 1 MiB of zeros left as
  // holes (their CRC from crc32_concat), so the entries after them start
  // past 4 GiB (8 GiB: no disk used) and their central headers carry ZIP64
  // offsets. Names of 64 lengths
  // give the local padding every length (0 and 4..67 bytes); deflated
  // entries (unaligned) and a streamed one are there too.
  TempDir dir;
  const auto path = dir / "big.zip";
  constexpr std::uint64_t kHole = (4ull << 30) + (1ull << 20);
  Fd out(path);
  const std::string mib(1u << 20, '\0');
  const std::uint32_t crc_mib = crc32_of(mib);
  std::uint32_t crc = 0;
  for (std::uint64_t i = 0; i < kHole >> 20; ++i)
    crc = modelzip::detail::crc32_concat(crc, crc_mib, 1u << 20);
  modelzip::zip::EntryInfo hole;
  hole.name = "hole.bin";
  hole.crc32 = crc;
  hole.compressed_size = hole.uncompressed_size = kHole;
  const auto head = modelzip::zip::encode_local_header(
      {.name = hole.name, .crc = crc, .compressed = kHole, .uncompressed = kHole, .zip64 = true}, 0,
      true);
  REQUIRE(::pwrite(out.fd, head.data(), head.size(), 0) == static_cast<ssize_t>(head.size()));
  hole.data_offset = head.size();
  REQUIRE(::ftruncate(out.fd, static_cast<off_t>(head.size() + kHole)) == 0);

  std::vector<Expected> expected;
  for (int n = 1; n <= 64; ++n) expected.push_back({"s" + std::string(n - 1, 'x'), "a"});
  for (int n = 1; n <= 8; ++n)
    expected.push_back({"d" + std::string(n * 3, 'y'), pattern(1000 + n, n), true});
  expected.push_back({"streamed", pattern(300000, 77)});
  // A second one right after it: big sizes and a big offset.
  modelzip::zip::EntryInfo hole2 = hole;
  hole2.name = "hole2.bin";
  hole2.local_header_offset = head.size() + kHole;
  const auto head2 = modelzip::zip::encode_local_header(
      {.name = hole2.name, .crc = crc, .compressed = kHole, .uncompressed = kHole, .zip64 = true},
      hole2.local_header_offset, true);
  REQUIRE(
      ::pwrite(out.fd, head2.data(), head2.size(), static_cast<off_t>(hole2.local_header_offset)) ==
      static_cast<ssize_t>(head2.size()));
  hole2.data_offset = hole2.local_header_offset + head2.size();
  REQUIRE(::ftruncate(out.fd, static_cast<off_t>(hole2.data_offset + kHole)) == 0);
  modelzip::zip::StreamZipWriter w(out.fd, path.string(), hole2.data_offset + kHole);
  w.keep(hole);
  w.keep(hole2);
  for (const auto& e : expected) {
    const std::vector<Bytes> pieces = {Bytes::copy_of(e.content)};
    if (e.deflated)
      w.add_deflated(e.name, pieces);
    else if (e.name == "streamed")
      w.add_stored_streamed(e.name, e.content.size(), [&](const auto& sink) {
        sink(std::as_bytes(std::span(e.content)).first(100000));
        sink(std::as_bytes(std::span(e.content)).subspan(100000));
      });
    else
      w.add_stored(e.name, pieces);
  }
  w.finish();

  // modelzip's reader: every entry past 4 GiB, CRC checked.
  Bytes mapped = io::map_file(path);
  const auto d = modelzip::zip::parse_directory(mapped.span(), Limits{});
  modelzip::zip::EntryReader reader(mapped, Limits{});
  REQUIRE(d.entries.size() == expected.size() + 2);
  CHECK(d.entries[1].local_header_offset > 0xFFFFFFFFull);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& e = d.entries[i + 2];
    INFO("entry " << e.name);
    CHECK(e.name == expected[i].name);
    CHECK(e.local_header_offset > 0xFFFFFFFFull);
    if (e.stored()) CHECK(e.data_offset % 64 == 0);
    CHECK(std::string(reader.read(e, true).as_string_view()) == expected[i].content);
  }
  // zipinfo computes where each entry ends from its central header and
  // reports any gap or overlap before the next one ("extra bytes").
  // (No structured binding: clang 14 cannot capture one in doctest's INFO.)
  const auto zipinfo = shell("zipinfo -v '" + path.string() + "' 2>&1");
  const int zi_status = zipinfo.first;
  const std::string& zi = zipinfo.second;
  const std::size_t complaint = zi.find("preceding this file");
  INFO(zi.substr(
      complaint == std::string::npos ? 0 : complaint - std::min<std::size_t>(complaint, 2500),
      3000));
  CHECK(zi_status == 0);
  // ("There are an extra N bytes preceding this file.")
  CHECK(zi.find("preceding this file") == std::string::npos);
  CHECK(zi.find("error") == std::string::npos);
  CHECK(zi.find("warning") == std::string::npos);
  // unzip tests the entries past the hole (CRC); Python's zipfile reads them.
  CHECK(shell("unzip -tqq '" + path.string() + "' 's*' 'd*' 2>&1").first == 0);
  const auto [py_status, py] = shell(
      "/usr/bin/python3 -c \"import zipfile,sys\n"
      "z = zipfile.ZipFile(sys.argv[1])\n"
      "for i in z.infolist()[2:]:\n"
      "    assert i.header_offset > 2**32, i\n"
      "    z.read(i)\n"
      "print(len(z.infolist()))\" '" +
      path.string() + "' 2>&1");
  CHECK(py_status == 0);
  CHECK(py == std::to_string(expected.size() + 2) + "\n");
}

namespace {

// Writes the same entries into `path`, with or without
// write_large_data_directly(); returns the file's size.
std::uint64_t write_mixed(const std::filesystem::path& path, bool direct, const std::string& big,
                          const std::string& raw_source) {
  constexpr std::size_t kMiB = 1u << 20;
  Fd out(path);
  modelzip::zip::StreamZipWriter w(out.fd, path.string(), 0);
  if (direct) w.write_large_data_directly();
  w.add_stored("small", {Bytes::copy_of(pattern(1000, 7))});
  // Uneven pieces: joints inside and across the writer's 2 MiB stretches.
  std::vector<Bytes> pieces;
  const std::vector<std::size_t> cuts = {0, 5 * kMiB + 3, 5 * kMiB + 3, 11 * kMiB + 4096,
                                         big.size()};
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i)
    pieces.push_back(Bytes::copy_of(std::string_view(big).substr(cuts[i], cuts[i + 1] - cuts[i])));
  w.add_stored("big", pieces);
  w.add_deflated("deflated", {Bytes::copy_of(pattern(300000, 8))});
  w.add_stored("mid", {Bytes::copy_of(pattern(3 * kMiB + 17, 9))});
  if (!raw_source.empty()) {  // a large entry of another archive, copied as it is
    Bytes source = io::map_file(raw_source);
    const modelzip::zip::Directory d = modelzip::zip::parse_directory(source.span(), Limits{});
    const modelzip::zip::EntryInfo& e = d.entries.at(1);  // "big"
    w.add_raw("copied", e, source.slice(e.data_offset, e.compressed_size));
  }
  w.add_stored("last", {Bytes::copy_of(pattern(77, 10))});
  return w.finish();
}

}  // namespace

TEST_CASE("Large data written directly: the same bytes as through the descriptor") {
  constexpr std::size_t kMiB = 1u << 20;
  const std::string big = pattern(16 * kMiB + 12345, 11);
  TempDir dir;
  const auto source = dir / "source.zip", plain = dir / "plain.zip", direct = dir / "direct.zip";
  write_mixed(source, false, big, "");
  const std::uint64_t plain_size = write_mixed(plain, false, big, source.string());
  std::vector<io::SysCallRecord> calls;
  std::uint64_t direct_size = 0;
  {
    io::FaultInjector recorder(io::FaultInjector::Plan{.record_calls = true});
    recorder.install();
    direct_size = write_mixed(direct, true, big, source.string());
    recorder.uninstall();
    calls = recorder.records();
  }
  CHECK(direct_size == plain_size);
  CHECK(io_bytes(direct) == io_bytes(plain));  // the established path is the reference
  // Most of the large entries went through a second, O_DIRECT opening.
  std::set<int> direct_fds;
  std::uint64_t direct_bytes = 0;
  for (const auto& c : calls) {
    if (c.op == io::SysOp::open && (c.flags & O_DIRECT) != 0) direct_fds.insert(c.fd);
    if (c.op == io::SysOp::write && direct_fds.count(c.fd)) direct_bytes += c.data.size();
  }
  // "big" and "copied" hold 2 x 16 MiB, at most 2 x 4 MiB of edges.
  CHECK(direct_bytes >= 24 * kMiB);
  if (std::system("command -v unzip >/dev/null 2>&1") != 0)
    FAIL("unzip is not installed (tests need it: see .ci/install-deps)");
  const std::string cmd = "unzip -tqq '" + direct.string() + "' >/dev/null 2>&1";
  CHECK(std::system(cmd.c_str()) == 0);
}

TEST_CASE("A direct write that fails names the archive and the offset") {
  constexpr std::size_t kMiB = 1u << 20;
  TempDir dir;
  const auto path = dir / "fail.zip";
  // Counting run: which write is the first direct one.
  std::uint64_t nth = 0;
  {
    io::FaultInjector recorder(io::FaultInjector::Plan{.record_calls = true});
    recorder.install();
    Fd out(path);
    modelzip::zip::StreamZipWriter w(out.fd, path.string(), 0);
    w.write_large_data_directly();
    w.add_stored("big", {Bytes::copy_of(pattern(8 * kMiB, 12))});
    w.finish();
    recorder.uninstall();
    std::set<int> direct_fds;
    std::uint64_t writes = 0;
    for (const auto& c : recorder.records()) {
      if (c.op == io::SysOp::open && (c.flags & O_DIRECT) != 0) direct_fds.insert(c.fd);
      if (c.op != io::SysOp::write) continue;
      ++writes;
      if (direct_fds.count(c.fd) && nth == 0) nth = writes;
    }
  }
  REQUIRE(nth > 0);
  io::FaultInjector fail(io::FaultInjector::Plan{.action = io::FaultInjector::Action::fail,
                                                 .kind = io::SysOp::write,
                                                 .nth = nth,
                                                 .error = ENOSPC});
  fail.install();
  std::string message;
  try {
    Fd out(path);
    modelzip::zip::StreamZipWriter w(out.fd, path.string(), 0);
    w.write_large_data_directly();
    w.add_stored("big", {Bytes::copy_of(pattern(8 * kMiB, 12))});
    w.finish();
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::io);
    CHECK(e.context().archive == path.string());
    CHECK(e.context().offset.has_value());
    message = e.what();
  }
  fail.uninstall();
  CHECK(fail.fired());
  INFO(message);
  CHECK(message.find("No space left") != std::string::npos);
}

TEST_CASE("A stored entry whose CRC the caller knows is written with that CRC as given") {
  constexpr std::size_t kMiB = 1u << 20;
  const std::string small = pattern(1000, 21), big = pattern(6 * kMiB + 9, 22);
  for (bool direct : {false, true}) {
    INFO("direct " << direct);
    TempDir dir;
    const auto path = dir / "k.zip";
    {
      Fd out(path);
      modelzip::zip::StreamZipWriter w(out.fd, path.string(), 0);
      if (direct) w.write_large_data_directly();
      w.add_stored("small", {Bytes::copy_of(small)}, crc32_of(small));
      w.add_stored("big", {Bytes::copy_of(big.substr(0, kMiB)), Bytes::copy_of(big.substr(kMiB))},
                   crc32_of(big));
      // Trusted, not checked: a wrong CRC given is the CRC written.
      w.add_stored("wrong", {Bytes::copy_of(big)}, crc32_of(big) ^ 1u);
      w.finish();
    }
    const std::string file = io_bytes(path);
    Bytes mapped = io::map_file(path);
    const modelzip::zip::Directory d = modelzip::zip::parse_directory(mapped.span(), Limits{});
    modelzip::zip::EntryReader reader(mapped, Limits{});
    REQUIRE(d.entries.size() == 3);
    const std::uint32_t want[] = {crc32_of(small), crc32_of(big), crc32_of(big) ^ 1u};
    for (std::size_t i = 0; i < 3; ++i) {
      const auto& e = d.entries[i];
      INFO("entry " << e.name);
      CHECK(e.crc32 == want[i]);
      CHECK(get32(file, e.local_header_offset + 14) == want[i]);
    }
    CHECK(std::string(reader.read(d.entries[0], true).as_string_view()) == small);
    CHECK(std::string(reader.read(d.entries[1], true).as_string_view()) == big);
    CHECK_THROWS_AS(reader.read(d.entries[2], true), Error);
  }
}

TEST_CASE(
    "An entry's small leading pieces go out in one write, with the header when the CRC is known") {
  constexpr std::size_t kMiB = 1u << 20;
  // As a blob: a small FlatBuffer header, padding, then the tensor's bytes.
  const std::string head = pattern(104, 31), pad(24, '\0'), data = pattern(3 * kMiB + 5, 32);
  const std::string all = head + pad + data;
  for (bool known : {true, false})
    for (bool direct : {false, true}) {
      INFO("CRC known " << known << ", direct " << direct);
      TempDir dir;
      const auto path = dir / "l.zip";
      std::vector<io::SysCallRecord> calls;
      {
        Fd out(path);
        modelzip::zip::StreamZipWriter w(out.fd, path.string(), 0);
        if (direct) w.write_large_data_directly();
        io::FaultInjector recorder(io::FaultInjector::Plan{.record_calls = true});
        recorder.install();
        w.add_stored("blob", {Bytes::copy_of(head), Bytes::copy_of(pad), Bytes::copy_of(data)},
                     known ? std::optional<std::uint32_t>(crc32_of(all)) : std::nullopt);
        w.finish();
        recorder.uninstall();
        calls = recorder.records();
      }
      Bytes mapped = io::map_file(path);
      const modelzip::zip::Directory d = modelzip::zip::parse_directory(mapped.span(), Limits{});
      REQUIRE(d.entries.size() == 1);
      const auto& e = d.entries[0];
      modelzip::zip::EntryReader reader(mapped, Limits{});
      CHECK(std::string(reader.read(e, true).as_string_view()) == all);
      // The writes that touch the header and the two small pieces.
      const std::uint64_t lead_end = e.data_offset + head.size() + pad.size();
      std::vector<std::pair<std::uint64_t, std::size_t>> lead_writes;
      for (const auto& c : calls)
        if (c.op == io::SysOp::write && c.offset < lead_end)
          lead_writes.emplace_back(c.offset, c.data.size());
      if (known) {
        REQUIRE(lead_writes.size() == 1);
        CHECK(lead_writes[0].first == e.local_header_offset);
        CHECK(lead_writes[0].second == lead_end - e.local_header_offset);
      } else {  // the header is written last, with the CRC; the two pieces together
        REQUIRE(lead_writes.size() == 2);
        CHECK(lead_writes[0].first == e.data_offset);
        CHECK(lead_writes[0].second == head.size() + pad.size());
        CHECK(lead_writes[1].first == e.local_header_offset);
      }
    }
}
