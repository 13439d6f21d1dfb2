// io/shared_file_writer: processes writing disjoint ranges of one file at
// once leave exactly their bytes; long ranges go out directly, their edges
// with pwrite, short ranges through a shared mapping (pwrite past the end
// of the file); a refused, short or failed write of either kind is handled
// (fault injection).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "io/shared_file_writer.hpp"
#include "io/syscalls.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;
using Action = io::FaultInjector::Action;

namespace {

constexpr std::uint64_t MiB = 1u << 20;

// The byte every writer puts at file offset `i` (no run of it repeats
// within a page, so a misplaced page or piece shows).
std::byte pattern(std::uint64_t i) {
  return static_cast<std::byte>((i * 2654435761u >> 13) ^ (i >> 12));
}

std::vector<std::byte> pattern_bytes(std::uint64_t offset, std::uint64_t size) {
  std::vector<std::byte> out(size);
  for (std::uint64_t i = 0; i < size; ++i) out[i] = pattern(offset + i);
  return out;
}

// A file of `size` zero bytes, preallocated.
std::filesystem::path make_file(const TempDir& dir, std::uint64_t size) {
  const auto path = dir / "shared.bin";
  io::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  REQUIRE(fd.valid());
  REQUIRE(io::preallocate(fd.get(), 0, size));
  return path;
}

struct Range {
  std::uint64_t offset, size;
};

// Writes `ranges` with one writer, each from its own (unaligned) copy of
// the pattern; returns the writer's counts.
struct Counts {
  std::uint64_t direct = 0, cached = 0;
};
Counts write_ranges(const std::filesystem::path& path, const std::vector<Range>& ranges,
                    std::size_t chunk = 4u << 20) {
  io::SharedFileWriter w(path, ErrorContext{.archive = path.string()}, chunk);
  std::vector<std::vector<std::byte>> sources;  // borrowed by the writer until finish()
  for (const Range& r : ranges) {
    // One byte in, so that the source is never page-aligned (bounce buffer).
    std::vector<std::byte>& src = sources.emplace_back(r.size + 1);
    const auto bytes = pattern_bytes(r.offset, r.size);
    if (r.size) std::memcpy(src.data() + 1, bytes.data(), r.size);
    w.write(src.data() + 1, r.size, r.offset);
  }
  w.finish();
  return Counts{w.direct_bytes(), w.cached_bytes()};
}

std::vector<std::byte> file_bytes(const std::filesystem::path& path) {
  const std::string s = io_bytes(path);
  std::vector<std::byte> out(s.size());
  if (!s.empty()) std::memcpy(out.data(), s.data(), s.size());
  return out;
}

// The first offset where the file differs from the pattern, or -1.
long long first_difference(const std::filesystem::path& path, std::uint64_t size) {
  const auto got = file_bytes(path);
  if (got.size() != size) return static_cast<long long>(std::min<std::uint64_t>(got.size(), size));
  for (std::uint64_t i = 0; i < size; ++i)
    if (got[i] != pattern(i)) return static_cast<long long>(i);
  return -1;
}

}  // namespace

TEST_CASE("SharedFileWriter: two processes interleave long and strided ranges; bytes exact") {
  TempDir dir;
  const std::uint64_t size = 24 * MiB;
  const auto path = make_file(dir, size);
  // Process 0: a long range from 0 to 7 MiB + 123, then the first half of
  // every 3000-byte row of [16 MiB, 24 MiB). Process 1: the long range
  // after it up to 16 MiB, and the second halves. The long ranges meet
  // mid-page; every row half shares its pages with the other process's.
  std::vector<Range> mine[2];
  mine[0].push_back({0, 7 * MiB + 123});
  mine[1].push_back({7 * MiB + 123, 16 * MiB - (7 * MiB + 123)});
  for (std::uint64_t at = 16 * MiB; at < size; at += 3000) {
    const std::uint64_t row = std::min<std::uint64_t>(3000, size - at);
    mine[0].push_back({at, row / 2});
    mine[1].push_back({at + row / 2, row - row / 2});
  }
  pid_t child[2];
  for (int p = 0; p < 2; ++p) {
    child[p] = ::fork();
    REQUIRE(child[p] >= 0);
    if (child[p] == 0) {
      // Children exit with 0, or 2 if the long range did not go out
      // directly, or 3 on an error.
      try {
        const Counts c = write_ranges(path, mine[p]);
        std::uint64_t total = 0;
        for (const Range& r : mine[p]) total += r.size;
        _exit(c.direct >= 4 * MiB && c.direct + c.cached == total ? 0 : 2);
      } catch (...) {
        _exit(3);
      }
    }
  }
  for (int p = 0; p < 2; ++p) {
    int status = 0;
    REQUIRE(::waitpid(child[p], &status, 0) == child[p]);
    INFO("process " << p);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  CHECK(first_difference(path, size) == -1);
}

TEST_CASE("SharedFileWriter: later writers and a forked process's writer still write directly") {
  // Writers after the first take over its AIO context; a forked child
  // cannot use its parent's and must make its own.
  TempDir dir;
  const std::uint64_t size = 12 * MiB;
  const auto path = make_file(dir, size);
  const Counts first = write_ranges(path, {{0, 4 * MiB}});
  CHECK(first.direct == 4 * MiB);
  const Counts second = write_ranges(path, {{4 * MiB, 4 * MiB}});
  CHECK(second.direct == 4 * MiB);
  CHECK(second.cached == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    try {
      const Counts c = write_ranges(path, {{8 * MiB, 4 * MiB}});
      _exit(c.direct == 4 * MiB ? 0 : 2);
    } catch (...) {
      _exit(3);
    }
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const Counts third = write_ranges(path, {{0, 2 * MiB}});
  CHECK(third.direct == 2 * MiB);
  CHECK(first_difference(path, size) == -1);
}

TEST_CASE("SharedFileWriter: only whole 2 MiB stretches of a range go out directly") {
  TempDir dir;
  const auto path = make_file(dir, 12 * MiB);
  // [100, 9 MiB + 5): the 2 MiB boundaries inside are 2 MiB and 8 MiB.
  const Counts c = write_ranges(path, {{100, 9 * MiB - 95}});
  CHECK(c.direct == 6 * MiB);
  CHECK(c.cached == 9 * MiB - 95 - 6 * MiB);
  // No whole 2 MiB stretch (10 MiB is the only boundary inside): all
  // through the page cache.
  const Counts small = write_ranges(path, {{9 * MiB + 5, 2 * MiB + 2}});
  CHECK(small.direct == 0);
  CHECK(small.cached == 2 * MiB + 2);
  const auto got = file_bytes(path);
  const auto want = pattern_bytes(0, 12 * MiB);
  REQUIRE(got.size() == want.size());
  CHECK(std::all_of(got.begin(), got.begin() + 100, [](std::byte b) { return b == std::byte{0}; }));
  CHECK(std::equal(got.begin() + 100, got.begin() + 11 * MiB + 7, want.begin() + 100));
  CHECK(std::all_of(got.begin() + 11 * MiB + 7, got.end(),
                    [](std::byte b) { return b == std::byte{0}; }));
}

TEST_CASE("SharedFileWriter: the edges of a long range fill only their own pages of the cache") {
  // A mapping populates whole 2 MiB stretches (zeroing every page first);
  // an edge written with pwrite brings in only the pages it touches.
  TempDir dir;
  const auto path = make_file(dir, 12 * MiB);  // preallocated: nothing cached yet
  const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  // [3000, 7 MiB + 123): edges [3000, 2 MiB) and [6 MiB, 7 MiB + 123).
  const Counts c = write_ranges(path, {{3000, 7 * MiB + 123 - 3000}});
  CHECK(c.direct == 4 * MiB);
  io::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(fd.valid());
  void* map = ::mmap(nullptr, 12 * MiB, PROT_READ, MAP_SHARED, fd.get(), 0);
  REQUIRE(map != MAP_FAILED);
  std::vector<unsigned char> resident(12 * MiB / page);
  REQUIRE(::mincore(map, 12 * MiB, resident.data()) == 0);
  ::munmap(map, 12 * MiB);
  auto cached_pages = [&](std::uint64_t from, std::uint64_t to) {
    std::uint64_t n = 0;
    for (std::uint64_t p = from / page; p < to / page; ++p) n += resident[p] & 1;
    return n;
  };
  CHECK(cached_pages(0, page) == 1);  // the edge's first page, partly written
  CHECK(cached_pages(6 * MiB, 7 * MiB) == MiB / page);
  // The rest of the last edge's stretch was never touched.
  CHECK(cached_pages(7 * MiB + page, 8 * MiB) == 0);
  const auto got = file_bytes(path);
  CHECK(std::equal(got.begin() + 3000, got.begin() + static_cast<long>(7 * MiB + 123),
                   pattern_bytes(3000, 7 * MiB + 123 - 3000).begin()));
  CHECK(std::all_of(got.begin() + static_cast<long>(7 * MiB + 123), got.end(),
                    [](std::byte b) { return b == std::byte{0}; }));
}

TEST_CASE("SharedFileWriter: a refused direct write (EINVAL) falls back to the page cache") {
  TempDir dir;
  const auto path = make_file(dir, 8 * MiB);
  io::FaultInjector refuse(io::FaultInjector::Plan{
      .action = Action::fail, .kind = io::SysOp::write, .nth = 1, .error = EINVAL});
  refuse.install();
  const Counts c = write_ranges(path, {{0, 8 * MiB}});  // the first write is a direct one
  refuse.uninstall();
  CHECK(refuse.calls(io::SysOp::write) >= 2);
  CHECK(c.direct == 0);
  CHECK(c.cached == 8 * MiB);
  CHECK(first_difference(path, 8 * MiB) == -1);
}

TEST_CASE("SharedFileWriter: a short direct write goes on from where it stopped") {
  TempDir dir;
  const auto path = make_file(dir, 4 * MiB);
  // 12 KiB direct writes; the first writes half (6 KiB), so the rest of
  // its page (2 KiB) goes through the page cache and direct writes resume.
  io::FaultInjector shorten(
      io::FaultInjector::Plan{.action = Action::short_write, .kind = io::SysOp::write, .nth = 1});
  shorten.install();
  const Counts c = write_ranges(path, {{0, 4 * MiB}}, 12 * 1024);
  shorten.uninstall();
  CHECK(c.cached == 2048);
  CHECK(c.direct == 4 * MiB - 2048);
  CHECK(first_difference(path, 4 * MiB) == -1);
}

TEST_CASE("SharedFileWriter: a failed direct write is an Error naming the file and offset") {
  TempDir dir;
  const auto path = make_file(dir, 6 * MiB);
  io::FaultInjector fail(
      io::FaultInjector::Plan{.action = Action::fail, .kind = io::SysOp::write, .nth = 2});
  fail.install();
  try {
    write_ranges(path, {{0, 6 * MiB}});  // direct writes of 4 MiB, then 2 MiB
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::io);
    CHECK(std::string(e.what()).find("cannot write") != std::string::npos);
    CHECK(std::string(e.what()).find(path.string()) != std::string::npos);
    CHECK(e.context().offset == 4 * MiB);
  }
}

TEST_CASE("SharedFileWriter: pieces go into a shared mapping, seen by fault injection as writes") {
  TempDir dir;
  const auto path = make_file(dir, 4 * MiB);
  // Every other 1000 bytes of [3000, 3 MiB): pieces through the page cache.
  std::vector<Range> pieces;
  for (std::uint64_t at = 3000; at + 1000 <= 3 * MiB; at += 2000) pieces.push_back({at, 1000});
  // The 2nd copy is cut short (and must go on); every copy is recorded.
  io::FaultInjector shorten(io::FaultInjector::Plan{
      .action = Action::short_write, .kind = io::SysOp::write, .nth = 2, .record_calls = true});
  shorten.install();
  const Counts c = write_ranges(path, pieces);
  shorten.uninstall();
  CHECK(shorten.fired());
  CHECK(c.direct == 0);
  CHECK(c.cached == pieces.size() * 1000);
  // One copy per piece and per 2 MiB stretch it touches, plus the rest of
  // the short one.
  std::uint64_t crossing = 0;
  for (const Range& r : pieces)
    crossing += r.offset / (2 * MiB) != (r.offset + r.size - 1) / (2 * MiB);
  CHECK(crossing == 1);  // [2097000, 2098000)
  CHECK(shorten.calls(io::SysOp::write) == pieces.size() + crossing + 1);
  // The records are exactly the pieces (the short one in two), in order.
  std::uint64_t at = 0, bytes = 0;
  bool ordered = true, exact = true;
  for (const auto& r : shorten.records()) {
    if (r.op != io::SysOp::write) continue;
    ordered = ordered && r.offset >= at;
    at = r.offset + r.data.size();
    bytes += r.data.size();
    const auto want = pattern_bytes(r.offset, r.data.size());
    exact = exact && std::memcmp(want.data(), r.data.data(), r.data.size()) == 0;
  }
  CHECK(ordered);
  CHECK(exact);
  CHECK(bytes == pieces.size() * 1000);
  const auto got = file_bytes(path);
  REQUIRE(got.size() == 4 * MiB);
  for (const Range& r : pieces) {
    INFO("piece at " << r.offset);
    REQUIRE(std::equal(got.begin() + static_cast<long>(r.offset),
                       got.begin() + static_cast<long>(r.offset + r.size),
                       pattern_bytes(r.offset, r.size).begin()));
    REQUIRE(got[r.offset + r.size] == std::byte{0});  // the gap after it stays zero
  }
}

TEST_CASE(
    "SharedFileWriter: a failed copy into the mapping is an Error naming the file and offset") {
  TempDir dir;
  const auto path = make_file(dir, 1 * MiB);
  io::FaultInjector fail(io::FaultInjector::Plan{
      .action = Action::fail, .kind = io::SysOp::write, .nth = 3, .error = ENOSPC});
  fail.install();
  try {
    write_ranges(path, {{10, 100}, {5000, 100}, {70000, 100}});
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::io);
    CHECK(std::string(e.what()).find("cannot write") != std::string::npos);
    CHECK(std::string(e.what()).find(path.string()) != std::string::npos);
    CHECK(e.context().offset == 70000);
  }
  fail.uninstall();
  const auto got = file_bytes(path);
  CHECK(got[70000] == std::byte{0});
  CHECK(got[5000] == pattern(5000));
}

TEST_CASE(
    "SharedFileWriter: a range past the end of the file is written with pwrite, never SIGBUS") {
  TempDir dir;
  const auto path = make_file(dir, 1 * MiB);
  // Half in the file, half beyond its end: the mapping cannot populate the
  // pages past the end, so the range goes out with pwrite (growing the file).
  const Counts c = write_ranges(path, {{1 * MiB - 3000, 6000}});
  CHECK(c.cached == 6000);
  CHECK(std::filesystem::file_size(path) == 1 * MiB + 3000);
  const auto got = file_bytes(path);
  CHECK(std::equal(got.begin() + static_cast<long>(1 * MiB - 3000), got.end(),
                   pattern_bytes(1 * MiB - 3000, 6000).begin()));
}

TEST_CASE("preallocate: extends the file with zeros; a bad descriptor is refused") {
  TempDir dir;
  const auto path = dir / "p.bin";
  write_file(path, "abc");
  io::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  REQUIRE(fd.valid());
  CHECK(io::preallocate(fd.get(), 2, 3 * MiB));
  CHECK(std::filesystem::file_size(path) == 2 + 3 * MiB);
  const std::string s = io_bytes(path);
  CHECK(s.substr(0, 3) == "abc");
  CHECK(s.find_first_not_of('\0', 3) == std::string::npos);
  CHECK_FALSE(io::preallocate(-1, 0, 4096));
}
