// A Writer reuses the archive it parsed at open() for its commit only if the
// file is still the same: whatever another writer did in between (append,
// rewrite by rename, removal) is kept by the commit, never lost.
#include <doctest/doctest.h>

#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "../zip/expect_error.hpp"
#include "model_builder.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/error.hpp"
#include "modelzip/writer.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

Tensor floats(std::mt19937_64& rng, std::int64_t n) {
  return Tensor::dense(DType::float32, {n}, random_bytes(rng, static_cast<std::size_t>(n) * 4));
}

void commit_tag(const std::filesystem::path& path, const std::string& tag, const Tensor& t,
                bool append = true) {
  Writer w = Writer::open(path, WriterOptions{.append = append});
  NewTag nt;
  nt.add("w", t);
  w.add_tag(tag, std::move(nt));
  w.commit();
}

}  // namespace

TEST_CASE("A commit keeps what another writer committed after this Writer was opened") {
  std::mt19937_64 rng(21);
  const Tensor t0 = floats(rng, 5000), t1 = floats(rng, 6000), t2 = floats(rng, 7000);
  for (const bool other_appends : {true, false}) {
    INFO("the other writer " << (other_appends ? "appends" : "rewrites"));
    TempDir dir;
    const auto path = dir / "m.zip";
    commit_tag(path, "v0", t0);
    Writer late = Writer::open(path);  // parses the archive holding v0
    commit_tag(path, "v1", t1, other_appends);
    NewTag nt;
    nt.add("w", t2);
    nt.add("again", t1.to_owned());  // equal to the other writer's blob: found by dedup
    late.add_tag("v2", std::move(nt));
    late.commit();
    CHECK(late.last_stats().blobs_deduplicated == 1);
    Archive a = Archive::open(path);
    CHECK(a.tags() == std::vector<std::string>{"v0", "v1", "v2"});
    CHECK(a.tensor("w", "v0") == t0);
    CHECK(a.tensor("w", "v1") == t1);
    CHECK(a.tensor("w", "v2") == t2);
    CHECK(a.tensor("again", "v2") == t1);
    CHECK(a.verify().empty());
  }
}

TEST_CASE("A commit after the archive was removed or replaced builds on what is there now") {
  std::mt19937_64 rng(22);
  const Tensor t0 = floats(rng, 3000), t1 = floats(rng, 3000), t2 = floats(rng, 3000);
  TempDir dir;
  const auto path = dir / "m.zip";
  commit_tag(path, "v0", t0);
  {
    Writer w = Writer::open(path);
    std::filesystem::remove(path);
    NewTag nt;
    nt.add("w", t1);
    w.add_tag("v1", std::move(nt));
    w.commit();
    CHECK(Archive::open(path).tags() == std::vector<std::string>{"v1"});
  }
  {
    // Another archive of the same size moved into place.
    const auto other = dir / "other.zip";
    commit_tag(other, "x0", t2);
    REQUIRE(std::filesystem::file_size(other) == std::filesystem::file_size(path));
    Writer w = Writer::open(path);
    std::filesystem::rename(other, path);
    NewTag nt;
    nt.add("w", t0);
    w.add_tag("v2", std::move(nt));
    w.commit();
    Archive a = Archive::open(path);
    CHECK(a.tags() == std::vector<std::string>{"x0", "v2"});
    CHECK(a.tensor("w", "x0") == t2);
    CHECK(a.tensor("w", "v2") == t0);
  }
}

TEST_CASE("A commit with nothing staged leaves the archive byte for byte as it is") {
  std::mt19937_64 rng(23);
  TempDir dir;
  const auto path = dir / "m.zip";
  {
    Writer w = Writer::open(path);
    w.commit();  // no archive yet: an archive without tags
    CHECK(w.last_stats().bytes_written > 0);
  }
  CHECK(Archive::open(path).tags().empty());
  commit_tag(path, "v0", floats(rng, 1000));
  const std::string before = io_bytes(path);
  const auto modified = std::filesystem::last_write_time(path);
  Writer w = Writer::open(path);
  w.commit();
  CHECK(w.last_stats().bytes_written == 0);
  CHECK_FALSE(w.last_stats().appended);
  CHECK(io_bytes(path) == before);
  CHECK(std::filesystem::last_write_time(path) == modified);
  CHECK(w.tags() == std::vector<std::string>{"v0"});
}

TEST_CASE("A Writer moved from throws Error(invalid_argument); assigning to it revives it") {
  std::mt19937_64 rng(29);
  TempDir dir;
  const auto path = dir / "m.zip";
  commit_tag(path, "v0", floats(rng, 10));
  Writer w = Writer::open(path);
  Writer moved = std::move(w);
  for (const auto& call : std::vector<std::function<void()>>{
           [&] { (void)w.tags(); }, [&] { w.commit(); }, [&] { w.add_tag("v1", NewTag{}); },
           [&] { w.replace_tag("v0", NewTag{}); }, [&] { w.remove_tag("v0"); },
           [&] { w.keep_last(1); }, [&] { w.update_metadata([](Metadata&) {}); },
           [&] { w.collect_garbage(); }, [&] { w.discard(); }}) {
    auto e = caught(call);
    REQUIRE(e);
    CHECK(e->code() == ErrorCode::invalid_argument);
    CHECK(std::string(e->what()).find("moved from") != std::string::npos);
  }
  CHECK(w.last_stats().bytes_written == 0);
  CHECK(moved.tags() == std::vector<std::string>{"v0"});
  w = Writer::open(path);
  CHECK(w.tags() == std::vector<std::string>{"v0"});
}

TEST_CASE("An Archive moved from stays usable: moving copies") {
  std::mt19937_64 rng(31);
  TempDir dir;
  const auto path = dir / "m.zip";
  commit_tag(path, "v0", floats(rng, 10));
  Archive a = Archive::open(path);
  Archive b = std::move(a);
  CHECK(a.tags() == std::vector<std::string>{"v0"});  // NOLINT(bugprone-use-after-move)
  CHECK(a.tensor("w").numel() == 10);
  Archive c = Archive::open(path);
  c = std::move(b);
  CHECK(b.name() == path.string());  // NOLINT(bugprone-use-after-move)
  CHECK(c.newest_tag() == "v0");
}

TEST_CASE("discard drops every staged change, also of a failed commit; the Writer stays usable") {
  std::mt19937_64 rng(41);
  TempDir dir;
  const auto path = dir / "m.zip";
  commit_tag(path, "v0", floats(rng, 10));
  const std::string before = io_bytes(path);
  Writer w = Writer::open(path);
  auto keeper = std::make_shared<int>(0);
  std::vector<float> data(4, 1.0f);
  NewTag staged;
  staged.add("w", Tensor::dense(DType::float32, {4},
                                Bytes::borrow(std::as_bytes(std::span(data)), keeper)));
  staged.share("s", "gone", "w");  // can never commit: "gone" does not exist
  w.add_tag("v1", std::move(staged));
  w.remove_tag("v0");
  w.keep_last(1);
  w.collect_garbage();
  w.update_metadata([](Metadata& m) { m.model_name = "discarded"; });
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto e = caught([&] { w.commit(); });
    REQUIRE(e);
    CHECK(e->code() == ErrorCode::not_found);
  }
  CHECK(keeper.use_count() > 1);  // the staged tensor holds it
  w.discard();
  CHECK(keeper.use_count() == 1);
  CHECK(w.tags() == std::vector<std::string>{"v0"});
  w.commit();  // nothing staged
  CHECK(w.last_stats().bytes_written == 0);
  CHECK(io_bytes(path) == before);
  NewTag next;
  next.add("w", floats(rng, 3));
  w.add_tag("v2", std::move(next));
  w.commit();
  const Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"v0", "v2"});
  CHECK_FALSE(a.metadata().model_name.has_value());
}

// `for (auto& t : Archive::open(p).tags())` iterated a vector of the
// temporary Archive's state, freed before the loop body ran (AddressSanitizer
// and valgrind report the reads).
TEST_CASE("Accessors of a temporary Archive or Writer return copies that outlive it") {
  std::mt19937_64 rng(37);
  TempDir dir;
  const auto path = dir / "m.zip";
  commit_tag(path, "v0", floats(rng, 10));
  commit_tag(path, "v1", floats(rng, 12));
  std::vector<std::string> tags;
  for (const auto& t : Archive::open(path).tags()) tags.push_back(t);
  CHECK(tags == std::vector<std::string>{"v0", "v1"});
  std::string name;
  for (char c : Archive::open(path).name()) name += c;
  CHECK(name == path.string());
  const auto& newest = Archive::open(path).newest_tag();
  const auto& metadata = Archive::open(path).metadata();
  const auto& stats = Writer::open(path).last_stats();
  CHECK(newest == "v1");
  CHECK(metadata.writer.starts_with("modelzip"));
  CHECK(stats.bytes_written == 0);
  std::vector<std::int64_t> shape;
  for (std::int64_t d : Archive::open(path).tensor("w").shape()) shape.push_back(d);
  CHECK(shape == Shape{12});
}

// `for (float x : archive.tensor("w", {}, ReadMode::copy).as<float>())` read
// the owned values of a Tensor destroyed before the loop body ran, and
// `archive.load().at("w")` returned a reference into the temporary
// NamedTensors (AddressSanitizer and valgrind report the reads).
TEST_CASE("Views and tensors taken from a temporary Tensor or NamedTensors outlive it") {
  std::mt19937_64 rng(41);
  TempDir dir;
  const auto path = dir / "m.zip";
  const Tensor w = floats(rng, 64);
  commit_tag(path, "v0", w);
  const Archive archive = Archive::open(path);
  for (ReadMode mode : {ReadMode::copy, ReadMode::zero_copy}) {
    CAPTURE(static_cast<int>(mode));
    std::vector<float> values;
    for (float x : archive.tensor("w", {}, mode).as<float>()) values.push_back(x);
    CHECK(std::ranges::equal(values, w.as<float>()));
    values.clear();
    for (float x : Archive::open(path).tensor("w", {}, mode).as<float>()) values.push_back(x);
    CHECK(std::ranges::equal(values, w.as<float>()));
    values.clear();
    for (float x : archive.load({}, {.mode = mode}).at("w").as<float>()) values.push_back(x);
    CHECK(std::ranges::equal(values, w.as<float>()));
  }
  std::vector<std::int64_t> shape;
  for (std::int64_t d : archive.load({}, {.mode = ReadMode::copy}).at("w").shape())
    shape.push_back(d);
  CHECK(shape == Shape{64});
  static_assert(std::is_same_v<decltype(archive.load().at("w")), Tensor>);
}

// Run as "nobody" when the tests run as root (root may write a 0444 file).
TEST_CASE("A commit with nothing staged needs no permission to write; a real change is refused") {
  std::mt19937_64 rng(29);
  TempDir dir;
  std::filesystem::permissions(dir.path(), std::filesystem::perms::all);
  const auto path = dir / "m.zip";
  commit_tag(path, "v0", floats(rng, 1000));
  REQUIRE(::chmod(path.c_str(), 0444) == 0);
  const Tensor t = floats(rng, 100);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (::geteuid() == 0 &&
        (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0))
      ::_exit(2);
    try {
      Writer w = Writer::open(path);
      w.commit();
      if (w.tags() != std::vector<std::string>{"v0"}) ::_exit(3);
      NewTag nt;
      nt.add("w", t);
      w.add_tag("v1", std::move(nt));
      try {
        w.commit();
      } catch (const modelzip::Error& e) {
        const std::string what = e.what();
        ::_exit(what.find("may not write") != std::string::npos &&
                        e.context().archive == path.string()
                    ? 0
                    : 4);
      }
      ::_exit(5);
    } catch (...) {
      ::_exit(6);
    }
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"v0"});
}

TEST_CASE("A Writer given an http(s) URL says remote archives are read-only, before any I/O") {
  // No server listens on port 9 of 127.0.0.1: any attempt to connect or to
  // create a file named like the URL would give another error. (s3:// URLs
  // are written by multipart upload: tests/remote/test_s3_writes.py.)
  for (const char* url : {"http://127.0.0.1:9/a.zip", "https://127.0.0.1:9/a.zip"}) {
    INFO(url);
    CHECK_ERROR(Writer::open(url), ErrorCode::unsupported,
                std::string("remote archives are read-only: ") + url);
  }
  CHECK_FALSE(std::filesystem::exists("http:"));
}
