#include <doctest/doctest.h>

#include <cstring>
#include <map>

#include "modelzip/archive.hpp"
#include "modelzip/cancel.hpp"
#include "modelzip/error.hpp"
#include "modelzip/writer.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;

TEST_CASE("Progress is reported and a cancelled save changes nothing") {
  TempDir dir;
  auto path = dir / "m.zip";
  std::mt19937_64 rng(5);
  Bytes big = random_bytes(rng, 8 << 20);
  {
    NewTag t;
    t.add("w", Tensor::dense(DType::uint8, {8 << 20}, big));
    std::vector<Progress> seen;
    Writer w = Writer::open(path, WriterOptions{.progress = [&](const Progress& p) {
                              seen.push_back(p);
                              return true;
                            }});
    w.add_tag("v1", std::move(t));
    w.commit();
    REQUIRE(seen.size() >= 2);
    // The comparison stage (dedup) comes first, then the writing; each
    // counts from 0.
    for (std::size_t i = 1; i < seen.size(); ++i)
      if (seen[i].stage == seen[i - 1].stage)
        CHECK(seen[i].bytes_done >= seen[i - 1].bytes_done);
      else
        CHECK((seen[i - 1].stage == Progress::Stage::compare &&
               seen[i].stage == Progress::Stage::work));
    CHECK(seen.back().stage == Progress::Stage::work);
    CHECK(seen.back().bytes_done == seen.back().bytes_total);
    CHECK(seen.back().bytes_total >= (8u << 20));
  }
  auto before = io_bytes(path);
  NewTag t;
  t.add("w2", Tensor::dense(DType::uint8, {8 << 20}, random_bytes(rng, 8 << 20)));
  Writer w = Writer::open(path, WriterOptions{.progress = [](const Progress& p) {
                            return p.bytes_done < p.bytes_total / 2;
                          }});
  w.add_tag("v2", std::move(t));
  try {
    w.commit();
    FAIL("the save was not cancelled");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::cancelled);
    // The archive and the one tag the commit adds are named.
    CHECK(e.context().archive == path.string());
    CHECK(e.context().tag == "v2");
    CHECK(std::string(e.what()).find("'v2'") != std::string::npos);
  }
  CHECK(io_bytes(path) == before);
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"v1"});
}

TEST_CASE("Dedup's comparison is a progress stage of its own, reported as it reads, cancellable") {
  TempDir dir;
  auto path = dir / "m.zip";
  std::mt19937_64 rng(7);
  const Bytes big = random_bytes(rng, 24 << 20);
  auto tag_of = [&] {
    NewTag t;
    t.add("w", Tensor::dense(DType::uint8, {24 << 20}, big));
    return t;
  };
  {
    Writer w = Writer::open(path);
    w.add_tag("v1", tag_of());
    w.commit();
  }
  const auto before = io_bytes(path);
  // The same tensor again: compared with its namesake (24 MiB read from the
  // archive and from memory), nothing new written.
  std::vector<Progress> seen;
  {
    Writer w =
        Writer::open(path, WriterOptions{.append = false, .progress = [&](const Progress& p) {
                                           seen.push_back(p);
                                           return true;
                                         }});
    w.add_tag("v2", tag_of());
    w.commit();
    CHECK(w.last_stats().blobs_deduplicated == 1);
  }
  std::vector<Progress> compare;
  for (const auto& p : seen)
    if (p.stage == Progress::Stage::compare) compare.push_back(p);
  // Reported in steps as it reads (4 MiB), not once at the end.
  REQUIRE(compare.size() >= 6);
  CHECK(compare.front().bytes_done <= (4u << 20));
  for (std::size_t i = 1; i < compare.size(); ++i) {
    CHECK(compare[i].bytes_done >= compare[i - 1].bytes_done);
    CHECK(compare[i].bytes_done <= compare[i].bytes_total);
  }
  CHECK(compare.back().bytes_done == compare.back().bytes_total);
  CHECK(compare.back().bytes_done >= (24u << 20));        // the tensor's bytes
  CHECK(compare.back().bytes_done < (24u << 20) + 4096);  // and its blob header
  CHECK(seen.front().stage == Progress::Stage::compare);
  CHECK(seen.back().stage == Progress::Stage::work);

  // Without dedup there is nothing to compare.
  seen.clear();
  {
    Writer w = Writer::open(path, WriterOptions{.dedup = false, .progress = [&](const Progress& p) {
                                                  seen.push_back(p);
                                                  return true;
                                                }});
    w.add_tag("v3", tag_of());
    w.commit();
  }
  for (const auto& p : seen) CHECK(p.stage == Progress::Stage::work);

  // Cancelled halfway through the comparison: nothing written.
  const auto three = io_bytes(path);
  Writer w =
      Writer::open(path, WriterOptions{.progress = [](const Progress& p) {
                     return p.stage != Progress::Stage::compare || p.bytes_done < p.bytes_total / 2;
                   }});
  w.add_tag("v4", tag_of());
  try {
    w.commit();
    FAIL("the save was not cancelled");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::cancelled);
  }
  CHECK(io_bytes(path) == three);
  CHECK(three != before);
}

TEST_CASE("Loading with copies and verifying report progress; either can be cancelled") {
  TempDir dir;
  auto path = dir / "m.zip";
  std::mt19937_64 rng(6);
  // Three tensors of known sizes, each its own blob (no dedup: random bytes).
  const std::uint64_t sizes[] = {1 << 20, 3 << 20, 20 << 20};  // the last is split on 2 threads
  std::map<std::string, Bytes> data;
  {
    NewTag t;
    for (int i = 0; i < 3; ++i) {
      std::string name = "p" + std::to_string(i);
      data[name] = random_bytes(rng, sizes[i]);
      t.add(name, Tensor::dense(DType::uint8, {static_cast<std::int64_t>(sizes[i])}, data[name]));
    }
    Writer w = Writer::open(path);
    w.add_tag("v1", std::move(t));
    w.commit();
  }
  Archive a = Archive::open(path);

  std::vector<Progress> seen;
  auto loaded = a.load({}, {.mode = ReadMode::copy, .progress = [&](const Progress& p) {
                              seen.push_back(p);
                              return true;
                            }});
  REQUIRE(seen.size() == 3);  // one report per blob
  // Each blob is its header plus the data: totals at least the data's size.
  CHECK(seen.back().bytes_done == seen.back().bytes_total);
  CHECK(seen.back().bytes_total >= sizes[0] + sizes[1] + sizes[2]);
  CHECK(seen[0].bytes_done < seen[1].bytes_done);
  for (const auto& [name, bytes] : data) {
    const Tensor& t = loaded.at(name);
    CHECK_FALSE(t.values().is_mapped());  // owned copies
    REQUIRE(t.values().size() == bytes.size());
    CHECK(std::memcmp(t.values().data(), bytes.data(), bytes.size()) == 0);
  }

  std::vector<Progress> checked;
  CHECK(a.verify([&](const Progress& p) {
           checked.push_back(p);
           return true;
         }).empty());
  REQUIRE(checked.size() == a.entry_names().size());  // one report per entry
  CHECK(checked.back().bytes_done == checked.back().bytes_total);
  CHECK(checked.back().bytes_total > sizes[0] + sizes[1] + sizes[2]);

  int calls = 0;
  auto stop_early = [&](const Progress&) { return ++calls < 2; };
  CHECK_THROWS_WITH_AS(a.load({}, {.mode = ReadMode::copy, .progress = stop_early}),
                       doctest::Contains("cancelled"), Error);
  // A load of chosen names, or one that checks the CRCs of views, reports
  // and cancels the same way.
  for (ReadMode mode : {ReadMode::zero_copy, ReadMode::copy}) {
    std::vector<Progress> chosen;
    auto got = a.load({}, {.names = std::vector<std::string>{data.begin()->first},
                           .mode = mode,
                           .verify_crc = true,
                           .progress = [&](const Progress& p) {
                             chosen.push_back(p);
                             return true;
                           }});
    CHECK(got.size() == 1);
    REQUIRE(chosen.size() == 1);
    CHECK(chosen.back().bytes_done == chosen.back().bytes_total);
    CHECK(chosen.back().bytes_total >= data.begin()->second.size());
    calls = 0;
    CHECK_THROWS_WITH_AS(a.load({}, {.mode = mode, .verify_crc = true, .progress = stop_early}),
                         doctest::Contains("cancelled"), Error);
  }
  calls = 0;
  CHECK_THROWS_WITH_AS(a.verify(stop_early), doctest::Contains("cancelled"), Error);
}

TEST_CASE("A copying load detects a damaged stored blob, large or small") {
  TempDir dir;
  auto path = dir / "m.zip";
  std::mt19937_64 rng(7);
  Bytes small = random_bytes(rng, 4096), large = random_bytes(rng, 20 << 20);
  {
    NewTag t;
    t.add("small", Tensor::dense(DType::uint8, {4096}, small));
    t.add("large", Tensor::dense(DType::uint8, {20 << 20}, large));
    Writer w = Writer::open(path);
    w.add_tag("v1", std::move(t));
    w.commit();
  }
  // Flip one byte in the middle of each tensor's data, found by content.
  std::string file = io_bytes(path);
  for (const Bytes* b : {&small, &large}) {
    std::string needle(reinterpret_cast<const char*>(b->data()), 64);
    auto pos = file.find(needle);
    REQUIRE(pos != std::string::npos);
    file[pos + b->size() * 3 / 4] ^= 0x5A;  // in the second half: the other thread's part
  }
  write_file(path, file);
  Archive a = Archive::open(path);
  for (const char* name : {"small", "large"}) {
    CHECK(a.tensor(name).values().size() > 0);  // zero-copy views are not CRC-checked
    CHECK_THROWS_WITH_AS(a.tensor(name, {}, ReadMode::copy), doctest::Contains("CRC-32 mismatch"),
                         Error);
  }
}

// What a signal handler does (modelzip/cancel.hpp): the commit in progress
// stops at its next progress point and rolls back, whether it appends or
// rewrites; a new commit after clear_cancel() succeeds.
TEST_CASE("A process-wide cancellation request rolls a commit back") {
  TempDir dir;
  auto path = dir / "m.zip";
  std::mt19937_64 rng(8);
  {
    NewTag t;
    t.add("w", Tensor::dense(DType::uint8, {1 << 20}, random_bytes(rng, 1 << 20)));
    Writer w = Writer::open(path);
    w.add_tag("v1", std::move(t));
    w.commit();
  }
  const std::string before = io_bytes(path);
  for (bool append : {true, false}) {
    INFO("append " << append);
    NewTag t;
    t.add("big", Tensor::dense(DType::uint8, {16 << 20}, random_bytes(rng, 16 << 20)));
    // The request arrives once writing has begun, as from a signal handler.
    Writer w =
        Writer::open(path, WriterOptions{.append = append, .progress = [](const Progress& p) {
                                           if (p.bytes_done > 0) request_cancel();
                                           return true;
                                         }});
    w.add_tag("v2", std::move(t));
    try {
      w.commit();
      FAIL("the commit was not cancelled");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::cancelled);
      CHECK(std::string(e.what()).find("m.zip") != std::string::npos);
    }
    CHECK(cancel_requested());
    clear_cancel();
    CHECK(io_bytes(path) == before);
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
      const std::string name = entry.path().filename().string();
      INFO(name);
      CHECK((name == "m.zip" || name == ".m.zip.modelzip-lock"));
    }
    // Requested before the commit: nothing is done at all.
    request_cancel();
    CHECK_THROWS_AS(w.commit(), Error);
    clear_cancel();
    CHECK(io_bytes(path) == before);
  }
}
