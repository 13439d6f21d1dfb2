// The collective commit and the resharding reader under MPI, run by meson
// as `mpirun -np 1`, `2` and `4`. Every rank runs every test case (rank 0
// prints doctest's report; the others write theirs to a log printed only
// if they fail). Test cases call the collectives in the same order on
// every rank, so a CHECK that fails never desynchronizes them.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <thread>

#include "../graph/graph_fixtures.hpp"
#include "../zip/expect_error.hpp"
#include "checkpoint/archive_impl.hpp"
#include "checkpoint/archive_state.hpp"
#include "core/crc32.hpp"
#include "dist/commit_messages.hpp"
#include "dist/dedup.hpp"
#include "dist/model.hpp"
#include "format/tensor_blob.hpp"
#include "io/syscalls.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/dist/background_save.hpp"
#include "modelzip/dist/mpi.hpp"
#include "modelzip/error.hpp"
#include "modelzip/graph/checkpoint.hpp"
#include "modelzip/writer.hpp"
#include "test_support.hpp"
#include "zip/zip_stream_writer.hpp"
#include "zip_structure.hpp"

using namespace modelzip;
using namespace modelzip::disttest;
namespace fs = std::filesystem;

namespace {

MpiCommunicator* g_comm = nullptr;
Communicator& comm() {
  return *g_comm;
}

// Waits for every rank (the test's own synchronisation, straight from MPI:
// the library needs no barrier). Polled with a deadline, so that a rank that
// failed before it fails this one instead of hanging it.
void barrier() {
  MPI_Request r;
  REQUIRE(MPI_Ibarrier(g_comm->comm(), &r) == MPI_SUCCESS);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  for (int done = 0; !done;) {
    REQUIRE(MPI_Test(&r, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// A folder shared by all ranks (made by rank 0), removed at the end.
class SharedDir {
 public:
  SharedDir() {
    std::string path;
    if (comm().rank() == 0) {
      dir_.emplace();
      path = dir_->path().string();
    }
    path_ = comm().broadcast(path, 0);
  }
  ~SharedDir() { barrier(); }
  fs::path operator/(const std::string& name) const { return fs::path(path_) / name; }
  fs::path path() const { return path_; }

 private:
  std::optional<testing::TempDir> dir_;
  std::string path_;
};

std::vector<float> floats_of(const Tensor& t) {
  auto span = t.as<float>();
  return {span.begin(), span.end()};
}

// Everything in `dir` but `keep`.
std::set<std::string> others_in(const fs::path& dir, const std::string& keep) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename() != keep && !e.path().filename().string().ends_with("-lock"))
      out.insert(e.path().filename().string());
  return out;
}

// Whether every rank's `s` equals rank 0's.
bool same_on_every_rank(const std::string& s) {
  const std::string root = comm().broadcast(s, 0);
  return !comm().agree(root == s ? "" : "differs").has_value();
}

Versions second_versions() {
  return [](const std::string& name) {
    return name == "embed.weight" || name == "conv.weight" || name == "big" || name == "empty" ? 1
                                                                                               : 2;
  };
}

// Checks every parameter of `tag` against the model at `version`.
void check_tag_values(const Archive& a, const std::string& tag, const Versions& version) {
  for (const auto& p : model_defs()) {
    CAPTURE(p.name);
    Tensor t = a.tensor(p.name, tag);
    CHECK(t.shape() == p.shape);
    CHECK(floats_of(t) == global_values(p, version(p.name)));
  }
}

int run_python(const std::string& code) {
  const std::string file = "/tmp/modelzip-dist-" + std::to_string(getpid()) + ".py";
  testing::write_file(file, code);
  int rc = std::system(("/usr/bin/python3 " + file).c_str());
  fs::remove(file);
  return rc;
}

// A communicator that notes the largest message that passes through it and
// the bytes they carry together.
class Measuring final : public Communicator {
 public:
  explicit Measuring(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::vector<std::string> gather(std::string_view bytes, int root) override {
    note(bytes.size());
    return inner_.gather(bytes, root);
  }
  std::string broadcast(std::string_view bytes, int root) override {
    std::string out = inner_.broadcast(bytes, root);
    note(out.size());
    return out;
  }
  std::optional<Failure> agree(std::string_view error) override {
    note(error.size());
    return inner_.agree(error);
  }
  std::size_t largest = 0, total = 0;

 private:
  void note(std::size_t n) {
    largest = std::max(largest, n);
    total += n;
  }
  Communicator& inner_;
};

// Lowers dist::message_chunk_bytes on this rank (every rank makes one) for
// its lifetime.
struct SmallChunks {
  explicit SmallChunks(std::size_t bytes) { dist::set_message_chunk_bytes(bytes); }
  ~SmallChunks() { dist::set_message_chunk_bytes(0); }
  SmallChunks(const SmallChunks&) = delete;
  SmallChunks& operator=(const SmallChunks&) = delete;
};

// The encoded blob of the text `s` (a 0-d text tensor) and its CRC-32.
std::uint32_t text_blob_crc(const std::string& s) {
  const format::EncodedBlob blob =
      format::encode_tensor_blob(Tensor::strings({}, std::vector<std::string>{s}));
  std::string bytes;
  for (const Bytes& piece : blob.pieces) bytes += piece.as_string_view();
  return detail::crc32_of(std::as_bytes(std::span(bytes)));
}

// Two texts whose encoded blobs have the same size and CRC-32: 64 letters
// 'a', and the same with some of them 'c'. A CRC-32 is affine in the
// bytes, so turning a set of letters changes it by the xor of the changes
// of each letter turned alone; 64 such changes in 32 bits always hold a
// set that cancels out, found by Gaussian elimination.
std::pair<std::string, std::string> texts_of_one_crc() {
  const std::string base(64, 'a');
  const std::uint32_t crc = text_blob_crc(base);
  std::vector<std::pair<std::uint32_t, std::uint64_t>> basis;  // (change, letters turned)
  for (int i = 0; i < 64; ++i) {
    std::string turned = base;
    turned[static_cast<std::size_t>(i)] = 'c';
    std::uint32_t change = text_blob_crc(turned) ^ crc;
    std::uint64_t letters = std::uint64_t{1} << i;
    for (const auto& [c, l] : basis)  // highest leading bit first
      if ((change ^ c) < change) {
        change ^= c;
        letters ^= l;
      }
    if (change == 0) {
      std::string other = base;
      for (std::size_t k = 0; k < 64; ++k)
        if (letters >> k & 1) other[k] = 'c';
      return {base, other};
    }
    basis.emplace_back(change, letters);
    std::sort(basis.begin(), basis.end(), std::greater<>());
  }
  FAIL("no two texts of one CRC-32 found");
  return {};
}

}  // namespace

TEST_CASE("communicator: gather, broadcast, agree") {
  const int r = comm().rank(), n = comm().size();
  auto all = comm().gather("rank-" + std::to_string(r), 0);
  if (r == 0) {
    REQUIRE(all.size() == static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i)
      CHECK(all[static_cast<std::size_t>(i)] == "rank-" + std::to_string(i));
  } else {
    CHECK(all.empty());
  }
  CHECK(comm().broadcast(r == n - 1 ? std::string("from last\0x", 11) : "", n - 1) ==
        std::string("from last\0x", 11));
  barrier();
  CHECK_FALSE(comm().agree("").has_value());
  auto f = comm().agree(r == n - 1 ? "boom" : "");
  REQUIRE(f.has_value());
  CHECK(f->rank == n - 1);
  CHECK(f->message == "boom");
  f = comm().agree(r >= n / 2 ? "late " + std::to_string(r) : "");
  REQUIRE(f.has_value());
  CHECK(f->rank == n / 2);
  CHECK(f->message == "late " + std::to_string(n / 2));
}

TEST_CASE("collective commits: uneven shards, idle ranks, dedup, share, resharded reads") {
  const int r = comm().rank(), n = comm().size();
  SharedDir dir;
  const fs::path path = dir / "dist.zip";
  {
    CollectiveWriter w(path, comm());
    stage_model(w, r, n, all_at(1));
    CollectiveStats st = w.commit("step-1");
    CHECK_FALSE(st.appended);
    CHECK(st.blobs_written == model_defs().size());
  }
  {
    CollectiveWriter w(path, comm());
    stage_model(w, r, n, second_versions());
    CollectiveStats st = w.commit("step-2");
    CHECK(st.appended);
    CHECK(st.blobs_deduplicated == 4);
    CHECK(st.blobs_written == model_defs().size() - 4);
  }
  {
    CollectiveWriter w(path, comm());
    if (r == 0) w.share("fc.bias", "step-1", "fc.bias");
    const auto defs = model_defs();
    auto block = split_block(defs[0].shape, 0, r, n);
    w.add_shard(
        "embed.weight",
        float_tensor(block.shape, block_values(global_values(defs[0], 3), defs[0].shape, block)),
        defs[0].shape, block);
    CollectiveStats st = w.commit("step-3");
    CHECK(st.blobs_written == 1);
  }

  {
    // Only the last rank has anything to write; the others still commit.
    CollectiveWriter w(path, comm());
    if (r == n - 1) w.add("solo", float_tensor({3}, {1.0f, 2.0f, 3.0f}));
    CollectiveStats st = w.commit("step-4");
    CHECK(st.blobs_written == 1);
    if (r == n - 1) CHECK(st.bytes_written >= 12);
    if (r != n - 1 && r != 0) CHECK(st.bytes_written == 0);
  }

  Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"step-1", "step-2", "step-3", "step-4"});
  CHECK(floats_of(a.tensor("solo", "step-4")) == std::vector<float>{1.0f, 2.0f, 3.0f});
  CHECK(a.verify().empty());
  // Structure checked independently of the writers (local headers equal
  // central records, aligned data, zlib's CRCs, unzip and zipfile agree).
  if (r == 0) testing::check_zip_structure(path);
  check_tag_values(a, "step-1", all_at(1));
  check_tag_values(a, "step-2", second_versions());
  CHECK(a.param("fc.bias", "step-3").owner_tag == "step-1");
  CHECK(a.param("embed.weight", "step-2").owner_tag == "step-1");
  CHECK(floats_of(a.tensor("embed.weight", "step-3")) == global_values(model_defs()[0], 3));

  // Every stored entry's data, and so every tensor's values, is 64-aligned.
  const Bytes file = a.entry("step-1/params/0.fb");
  for (const auto& name : a.entry_names()) {
    CAPTURE(name);
    const auto* info = Archive::Impl::of(a).find_entry(name);
    REQUIRE(info);
    CHECK(info->data_offset % 64 == 0);
  }
  for (const auto& p : model_defs()) {
    Tensor t = a.tensor(p.name, "step-1");
    if (t.values().size()) CHECK(reinterpret_cast<std::uintptr_t>(t.values().data()) % 64 == 0);
  }

  // Any number of readers: each reads the blocks of a split into M parts,
  // touching only the bytes of its block.
  for (int m = 1; m <= 4; ++m)
    for (const auto& p : model_defs()) {
      if (p.shape.empty()) continue;
      for (std::size_t dim = 0; dim < std::min<std::size_t>(p.shape.size(), 2); ++dim)
        for (int part = 0; part < m; ++part) {
          CAPTURE(p.name);
          CAPTURE(m);
          CAPTURE(dim);
          Block b = split_block(p.shape, dim, part, m);
          BlockReadStats stats;
          Tensor t = read_block(a, p.name, b, "step-2", &stats);
          CHECK(t.shape() == b.shape);
          CHECK(floats_of(t) ==
                block_values(global_values(p, second_versions()(p.name)), p.shape, b));
          CHECK(stats.bytes_read == numel_of(b.shape) * 4);
          if (dim == 0 && numel_of(b.shape) > 0) CHECK(stats.zero_copy);
        }
    }

  // Byte-exact: a single process saving the same tags writes the same entries.
  std::string mismatch;
  if (r == 0) {
    const fs::path single = dir / "single.zip";
    {
      Writer w = Writer::open(single);
      w.add_tag("step-1", whole_model(all_at(1), n));
      w.commit();
      w.add_tag("step-2", whole_model(second_versions(), n));
      w.commit();
      NewTag t3;
      t3.share("fc.bias", "step-1", "fc.bias");
      t3.add("embed.weight",
             float_tensor(model_defs()[0].shape, global_values(model_defs()[0], 3)));
      w.add_tag("step-3", std::move(t3));
      w.commit();
      NewTag t4;
      t4.add("solo", float_tensor({3}, {1.0f, 2.0f, 3.0f}));
      w.add_tag("step-4", std::move(t4));
      w.commit();
    }
    Archive b = Archive::open(single);
    // The whole file: same entries at the same offsets, same directory.
    CHECK(testing::io_bytes(path) == testing::io_bytes(single));
    auto names_a = a.entry_names(), names_b = b.entry_names();
    std::sort(names_a.begin(), names_a.end());
    std::sort(names_b.begin(), names_b.end());
    CHECK(names_a == names_b);
    for (const auto& name : names_a) {
      if (!b.has_entry(name)) continue;
      const Bytes x = a.entry(name, ReadMode::copy), y = b.entry(name, ReadMode::copy);
      if (x.as_string_view() != y.as_string_view()) mismatch += name + " ";
      CHECK(Archive::Impl::of(a).find_entry(name)->crc32 ==
            Archive::Impl::of(b).find_entry(name)->crc32);
    }
    // Third-party readers: Info-ZIP and Python's zipfile test every CRC.
    CHECK(std::system(("unzip -tqq " + path.string()).c_str()) == 0);
    CHECK(run_python("import zipfile,sys\nz=zipfile.ZipFile(" + std::string("'") + path.string() +
                     "')\nsys.exit(1 if z.testzip() is not None else 0)\n") == 0);
  }
  CHECK(mismatch == "");
  barrier();
}

TEST_CASE("collective commits of updater state and a training config: a single writer's tag") {
  const int r = comm().rank(), n = comm().size();
  SharedDir dir;
  const fs::path path = dir / "optim.zip";
  training::TrainingConfig config;
  config.iteration_count = 7;
  config.properties["origin"] = "last rank";
  const Bytes config_bytes = training::encode_training_config(config);
  for (int version = 1; version <= 2; ++version) {
    CollectiveWriter w(path, comm());
    stage_model(w, r, n, all_at(version));
    stage_updater(w, r, n, version);
    if (r == n - 1) w.set_entry(std::string(kTrainingConfigEntryName), config_bytes);
    CollectiveStats st = w.commit("opt-" + std::to_string(version));
    if (version == 2) {
      // Every "V" and "step" is its namesake of opt-1, and so is "empty"
      // (no elements); the other parameters and every "M" changed.
      const std::uint64_t with_state = model_defs().size() - 1;  // all but "empty"
      CHECK(st.blobs_deduplicated == 2 * with_state + 1);
      CHECK(st.blobs_written == model_defs().size() - 1 + with_state);
    }
  }

  Archive a = Archive::open(path);
  CHECK(a.verify().empty());
  CHECK(load_training_config(a, "opt-2") == config);
  if (r == 0) testing::check_zip_structure(path);
  CHECK(a.updater_states("opt-2").size() == 3 * (model_defs().size() - 1));
  // Any layout reads back any block of any state, as of parameters.
  for (int m = 1; m <= 3; ++m)
    for (const auto& p : model_defs()) {
      if (numel_of(p.shape) == 0) continue;
      for (const auto& s : updater_state_names())
        for (std::size_t dim = 0; dim < std::min<std::size_t>(p.shape.size(), 2); ++dim)
          for (int part = 0; part < m; ++part) {
            CAPTURE(p.name);
            CAPTURE(s);
            Block b = split_block(p.shape, dim, part, m);
            BlockReadStats stats;
            Tensor t = read_updater_block(a, p.name, s, b, "opt-2", &stats);
            CHECK(floats_of(t) ==
                  block_values(global_values(state_def(p, s), s == "M" ? 2 : 1), p.shape, b));
            CHECK(stats.bytes_read == numel_of(b.shape) * 4);
          }
      CHECK(floats_of(a.updater_state(p.name, "step", "opt-2")) == floats_of(step_state(p, 1)));
    }
  CHECK_THROWS_WITH_AS(read_updater_block(a, "fc.weight", "M", Block{{0, 0}, {7, 9}}, "opt-2"),
                       doctest::Contains("updater state 'M' of 'fc.weight'"), Error);

  // Byte-exact: the single Writer's archive of the same two tags.
  std::string mismatch;
  if (r == 0) {
    const fs::path single = dir / "single.zip";
    {
      Writer w = Writer::open(single);
      for (int version = 1; version <= 2; ++version) {
        NewTag tag = whole_model(all_at(version), n);
        add_whole_updater(tag, n, version);
        tag.set_entry(std::string(kTrainingConfigEntryName), config_bytes);
        w.add_tag("opt-" + std::to_string(version), std::move(tag));
        w.commit();
      }
    }
    CHECK(testing::io_bytes(path) == testing::io_bytes(single));
    Archive b = Archive::open(single);
    CHECK(a.entry_names() == b.entry_names());
    for (const auto& name : a.entry_names())
      if (b.has_entry(name) && a.entry(name, ReadMode::copy).as_string_view() !=
                                   b.entry(name, ReadMode::copy).as_string_view())
        mismatch += name + " ";
  }
  CHECK(mismatch == "");

  // Updater state staged whole on two ranks, or a block that disagrees with
  // the global shape: the same error on every rank, the archive unchanged.
  const std::string before = testing::io_bytes(path);
  if (n > 1) {
    CollectiveWriter w(path, comm());
    if (r < 2) w.add_updater_state("fc.weight", "M", float_tensor({2}, {1.0f, 2.0f}));
    CHECK_THROWS_WITH_AS(
        w.commit("bad"),
        doctest::Contains("updater state 'M' of 'fc.weight': staged twice (by rank 0 and rank 1)"),
        Error);
  }
  {
    CollectiveWriter w(path, comm());
    CHECK_THROWS_WITH_AS(w.add_updater_shard("fc.weight", "M", float_tensor({2}, {1.0f, 2.0f}), {3},
                                             Block{{2}, {2}}),
                         doctest::Contains("updater state 'M' of 'fc.weight': block [2:4]"), Error);
    CHECK_THROWS_WITH_AS(
        w.add_shard("fc.weight", float_tensor({2}, {1.0f, 2.0f}), {4}, Block{{0}, {3}}),
        doctest::Contains("'fc.weight': the data has shape [2], the block [3]"), Error);
    CHECK_THROWS_AS(w.add_updater_state("fc.weight", "", float_tensor({1}, {1.0f})), Error);
    CHECK_THROWS_AS(w.set_entry("updater.txt", Bytes::copy_of("x")), Error);
    if (r == 0) w.set_entry(std::string(kTrainingConfigEntryName), Bytes::copy_of("not a config"));
    CHECK_THROWS_WITH_AS(w.commit("bad"), doctest::Contains("trainingConfig.fb"), Error);
  }
  CHECK(testing::io_bytes(path) == before);
  barrier();
}

TEST_CASE("a collective commit keeps the archive comment (FORMAT.md section 1)") {
  const int r = comm().rank(), n = comm().size();
  SharedDir dir;
  const fs::path path = dir / "comment.zip";
  {
    CollectiveWriter w(path, comm());
    stage_model(w, r, n, all_at(1));
    w.commit("step-1");
  }
  const std::string comment = "given by zip -z, kept by every commit";
  if (r == 0) {  // what `zip -z` does: the end record's comment length, then the comment
    std::string bytes = testing::io_bytes(path);
    REQUIRE(bytes.substr(bytes.size() - 22, 4) == "PK\x05\x06");
    bytes[bytes.size() - 2] = static_cast<char>(comment.size() & 0xFF);
    bytes[bytes.size() - 1] = static_cast<char>(comment.size() >> 8);
    testing::write_file(path, bytes + comment);
  }
  barrier();
  {
    CollectiveWriter w(path, comm());
    stage_model(w, r, n, second_versions());
    CHECK(w.commit("step-2").appended);
  }
  if (r == 0) {
    Archive a = Archive::open(path);
    CHECK(a.tags() == std::vector<std::string>{"step-1", "step-2"});
    CHECK(Archive::Impl::of(a).directory.comment == comment);
    CHECK(a.verify().empty());
    CHECK(run_python("import zipfile,sys\nz=zipfile.ZipFile('" + path.string() +
                     "')\nsys.exit(0 if z.comment == b'" + comment + "' else 1)\n") == 0);
  }
  barrier();
}

TEST_CASE("invalid shard specs fail the same way on every rank and leave the archive as it was") {
  const int r = comm().rank(), n = comm().size();
  SharedDir dir;
  const fs::path path = dir / "v.zip";
  {
    CollectiveWriter w(path, comm());
    stage_model(w, r, n, all_at(1));
    w.commit("base");
  }
  const std::string before = testing::io_bytes(path);
  auto f32 = [](Shape s) { return float_tensor(s, std::vector<float>(numel_of(s), 1.0f)); };
  struct Case {
    const char* name;
    std::function<void(CollectiveWriter&)> stage;
    const char* expect;
    bool multi_rank;  // needs two ranks or more
  };
  const std::vector<Case> cases = {
      {"missing block",
       [&](CollectiveWriter& w) {
         if (r == 0) w.add_shard("m", f32({1, 2}), {4, 2}, Block{{0, 0}, {1, 2}});
       },
       "cover 2 of its 8 elements", false},
      {"overlap",
       [&](CollectiveWriter& w) {
         if (r < 2) w.add_shard("o", f32({3, 2}), {4, 2}, Block{{r, 0}, {3, 2}});
       },
       "overlap", true},
      {"dtype",
       [&](CollectiveWriter& w) {
         Tensor t =
             r == 1 ? Tensor::dense(DType::float64, {1, 2}, Bytes::copy_of(std::string(16, '\0')))
                    : f32({1, 2});
         w.add_shard("d", t, {static_cast<std::int64_t>(n), 2}, Block{{r, 0}, {1, 2}});
       },
       "disagree on the dtype", true},
      {"global shape",
       [&](CollectiveWriter& w) {
         w.add_shard("g", f32({1, 2}), {static_cast<std::int64_t>(n) + (r == 1), 2},
                     Block{{r, 0}, {1, 2}});
       },
       "disagree on the global shape", true},
      {"staged twice",
       [&](CollectiveWriter& w) {
         if (r < 2) w.add("t", f32({2}));
       },
       "staged twice", true},
      {"tag exists", [&](CollectiveWriter& w) { w.add("x", f32({2})); }, "exists already", false},
  };
  for (const auto& c : cases) {
    if (c.multi_rank && n < 2) continue;
    CAPTURE(c.name);
    CollectiveWriter w(path, comm());
    c.stage(w);
    std::string message;
    try {
      w.commit(std::string(c.name) == std::string("tag exists") ? "BASE" : "next");
    } catch (const Error& e) {
      message = e.what();
    }
    CHECK(message.find(c.expect) != std::string::npos);
    CHECK(same_on_every_rank(message));
    if (r == 0) {
      CHECK(testing::io_bytes(path) == before);
      CHECK(others_in(dir.path(), "v.zip").empty());
    }
  }
  // A rank whose write fails: every rank reports it, the archive is unchanged,
  // and the next commit works.
  {
    io::FaultInjector fail(io::FaultInjector::Plan{
        .action = io::FaultInjector::Action::fail, .kind = io::SysOp::write, .nth = 1});
    CollectiveWriter w(path, comm());
    stage_model(w, r, n, all_at(5));
    if (r == n - 1) fail.install();
    std::string message;
    std::optional<Error> error;
    try {
      w.commit("next");
    } catch (const Error& e) {
      message = e.what();
      error = e;
    }
    fail.uninstall();
    CHECK(message.find("failed on rank " + std::to_string(n - 1)) != std::string::npos);
    CHECK(same_on_every_rank(message));
    // The failing rank's error arrives whole on every rank (rank 0
    // included): its code and errno value, and, where the failing rank is
    // not the root (whose first write has none), the offset of its failed
    // write into the shared file.
    REQUIRE(error);
    CHECK(error->code() == ErrorCode::io);
    CHECK(error->system_error() != 0);
    if (n > 1) CHECK(error->context().offset.has_value());
    CHECK(same_on_every_rank(std::to_string(error->context().offset.value_or(0))));
    if (r == 0) {
      CHECK(testing::io_bytes(path) == before);
      CHECK(others_in(dir.path(), "v.zip").empty());
    }
    w.commit("next");  // the staged tensors are kept after a failure
  }
  Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"base", "next"});
  check_tag_values(a, "next", all_at(5));
  CHECK(a.verify().empty());
}

TEST_CASE("an engine's own error (a time-out) names the archive and the tag") {
  // Each rank alone, over an engine whose operations fail as MpiCommunicator's
  // time-out does (a modelzip::Error without context).
  class TimingOut final : public Communicator {
   public:
    int rank() const override { return 0; }
    int size() const override { return 1; }
    std::vector<std::string> gather(std::string_view, int) override { fail(); }
    std::string broadcast(std::string_view, int) override { fail(); }
    std::optional<Failure> agree(std::string_view) override { fail(); }

   private:
    [[noreturn]] static void fail() {
      throw Error(ErrorCode::io, "MPI_Iallreduce timed out after 50 ms on rank 0");
    }
  } engine;
  testing::TempDir dir;
  const fs::path path = dir.path() / "t.zip";
  CollectiveWriter w(path, engine);
  w.add("x", float_tensor({2}, {1, 2}));
  try {
    w.commit("step-1");
    FAIL("the commit succeeded");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(what.find(path.string()) != std::string::npos);
    CHECK(what.find("tag 'step-1'") != std::string::npos);
    CHECK(what.find("timed out after 50 ms") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(path));
}

TEST_CASE("background collective saves: snapshots, two in flight in order, errors on every rank") {
  const int r = comm().rank(), n = comm().size();
  SharedDir dir;
  const fs::path path = dir / "bg.zip";
  // The saves' own communicator (an MPI_Comm_dup), while the main thread
  // goes on using comm() as a training loop would.
  std::optional<MpiCommunicator> saves;
  saves.emplace(MPI_COMM_WORLD, std::chrono::seconds(60));
  // A whole parameter per rank whose buffer the test changes after start().
  std::vector<float> mine(1000, static_cast<float>(r));
  const std::string mine_name = "mine." + std::to_string(r);
  auto borrowed = [&] {
    return Tensor::dense(DType::float32, {1000},
                         Bytes::borrow(std::as_bytes(std::span(mine)), nullptr));
  };
  {
    CollectiveWriter w(path, *saves);
    stage_model(w, r, n, all_at(1));
    w.add(mine_name, borrowed());
    BackgroundCollectiveSave first = BackgroundCollectiveSave::start(w, "step-1");
    std::fill(mine.begin(), mine.end(), -1.0f);  // never reaches step-1
    stage_model(w, r, n, second_versions());
    w.add(mine_name, borrowed());
    BackgroundCollectiveSave second = BackgroundCollectiveSave::start(w, "step-2");
    std::fill(mine.begin(), mine.end(), -2.0f);  // never reaches step-2
    CHECK_FALSE(comm().agree("").has_value());   // the training's collectives go on
    const CollectiveStats s2 = second.wait();    // the first ended before it
    CHECK(first.done());
    const CollectiveStats s1 = first.wait();
    CHECK_FALSE(s1.appended);
    CHECK(s1.blobs_written == model_defs().size() + static_cast<std::uint64_t>(n));
    CHECK(s2.appended);
    CHECK(s2.blobs_deduplicated == 4);
    CHECK(first.wait().blobs_written == s1.blobs_written);  // again: the same result
  }
  {
    Archive a = Archive::open(path);
    CHECK(a.tags() == std::vector<std::string>{"step-1", "step-2"});
    check_tag_values(a, "step-1", all_at(1));
    check_tag_values(a, "step-2", second_versions());
    for (int k = 0; k < n; ++k) {
      const std::string name = "mine." + std::to_string(k);
      CHECK(floats_of(a.tensor(name, "step-1")) == std::vector<float>(1000, static_cast<float>(k)));
      CHECK(floats_of(a.tensor(name, "step-2")) == std::vector<float>(1000, -1.0f));
    }
    CHECK(a.verify().empty());
  }
  const std::string before = testing::io_bytes(path);
  // A rank whose write fails in the background: wait() throws the same
  // error, naming that rank, on every rank; the archive is unchanged.
  {
    io::FaultInjector fail(io::FaultInjector::Plan{
        .action = io::FaultInjector::Action::fail, .kind = io::SysOp::write, .nth = 1});
    if (r == n - 1) fail.install();
    CollectiveWriter w(path, *saves);
    stage_model(w, r, n, all_at(5));
    BackgroundCollectiveSave save = BackgroundCollectiveSave::start(w, "step-3");
    std::string message;
    try {
      save.wait();
    } catch (const Error& e) {
      message = e.what();
      CHECK(e.code() == ErrorCode::io);
    }
    fail.uninstall();
    CHECK(message.find("failed on rank " + std::to_string(n - 1)) != std::string::npos);
    CHECK(same_on_every_rank(message));
    if (r == 0) CHECK(testing::io_bytes(path) == before);
  }
  // A failed save nobody waited for: the next start() throws its error on
  // every rank and takes nothing; the one after works.
  {
    CollectiveWriter w(path, *saves);
    stage_model(w, r, n, all_at(6));
    BackgroundCollectiveSave::start(w, "STEP-1");  // the tag exists: fails, handle dropped
    stage_model(w, r, n, all_at(6));
    std::string message;
    try {
      BackgroundCollectiveSave::start(w, "step-3");
    } catch (const Error& e) {
      message = e.what();
    }
    CHECK(message.find("nobody waited for it") != std::string::npos);
    CHECK(message.find("exists already") != std::string::npos);
    CHECK(same_on_every_rank(message));
    BackgroundCollectiveSave save = BackgroundCollectiveSave::start(w, "step-3");
    CHECK(save.wait().appended);
  }
  saves.reset();
  Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"step-1", "step-2", "step-3"});
  check_tag_values(a, "step-3", all_at(6));
  CHECK(a.verify().empty());
}

TEST_CASE("entries past 4 GiB use ZIP64 (sparse archive)") {
  const int r = comm().rank(), n = comm().size();
  SharedDir dir;
  const fs::path path = dir / "big.zip";
  constexpr std::uint64_t kPad = (4ull << 30) + (300ull << 20);
  if (r == 0) {
    // An archive whose first entry is 4.3 GiB of zeros left as a hole.
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0);
    std::vector<char> mib(1 << 20, 0);
    std::uint32_t crc_mib = modelzip::detail::crc32_of(std::as_bytes(std::span(mib))), crc = 0;
    for (std::uint64_t i = 0; i < kPad >> 20; ++i)
      crc = modelzip::detail::crc32_concat(crc, crc_mib, 1 << 20);
    modelzip::zip::EntryInfo pad;
    pad.name = "padding.bin";
    pad.crc32 = crc;
    pad.compressed_size = pad.uncompressed_size = kPad;
    auto head = modelzip::zip::encode_local_header(
        modelzip::zip::LocalHeader{
            .name = pad.name, .crc = crc, .compressed = kPad, .uncompressed = kPad, .zip64 = true},
        0, true);
    REQUIRE(::pwrite(fd, head.data(), head.size(), 0) == static_cast<ssize_t>(head.size()));
    pad.data_offset = head.size();
    REQUIRE(::ftruncate(fd, static_cast<off_t>(head.size() + kPad)) == 0);
    modelzip::zip::StreamZipWriter zw(fd, path.string(), head.size() + kPad);
    zw.keep(pad);
    zw.add_stored("modelzip.toml", {Bytes::copy_of(std::string("format_version = 1\n"))});
    zw.add_stored("old/params.txt", {Bytes::copy_of(std::string(""))});
    zw.add_stored("tags.txt", {Bytes::copy_of(std::string("old\n"))});  // last: appendable
    zw.finish();
    ::close(fd);
  }
  barrier();
  {
    CollectiveWriter w(path, comm());
    stage_model(w, r, n, all_at(7));
    CHECK(w.commit("new").appended);
  }
  Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"old", "new"});
  check_tag_values(a, "new", all_at(7));
  for (const auto& name : a.entry_names())
    if (name.starts_with("new/"))
      CHECK(Archive::Impl::of(a).find_entry(name)->local_header_offset > kPad);
  if (r == 0) {
    // Python's zipfile checks the CRCs of the new entries past 4 GiB.
    CHECK(run_python("import zipfile\nz=zipfile.ZipFile('" + path.string() +
                     "')\nfor i in z.infolist():\n    if i.filename.startswith('new/'): "
                     "z.read(i)\nassert z.getinfo('new/params/7.fb').header_offset > 2**32\n") ==
          0);
  }
  barrier();
}

TEST_CASE("an archive in another layout (tags.txt not last) is rewritten once") {
  const int r = comm().rank(), n = comm().size();
  SharedDir dir;
  const fs::path path = dir / "layout.zip";
  if (r == 0) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0);
    modelzip::zip::StreamZipWriter zw(fd, path.string(), 0);
    zw.add_stored("modelzip.toml", {Bytes::copy_of(std::string("format_version = 1\n"))});
    zw.add_stored("tags.txt", {Bytes::copy_of(std::string("old\n"))});
    zw.add_stored("old/params.txt", {Bytes::copy_of(std::string("x 0\n"))});
    zw.add_stored("old/params/0.fb", format::encode_tensor_blob(float_tensor({2}, {5, 6})).pieces);
    zw.finish();
    ::close(fd);
  }
  barrier();
  for (const char* tag : {"step-1", "step-2"}) {
    CollectiveWriter w(path, comm());
    stage_model(w, r, n, all_at(tag[5] - '0'));
    // The first commit rewrites the archive into modelzip's layout (a
    // single-writer commit), then appends in place, as the second does.
    CHECK(w.commit(tag).appended);
  }
  Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"old", "step-1", "step-2"});
  CHECK(floats_of(a.tensor("x", "old")) == std::vector<float>{5, 6});
  check_tag_values(a, "step-1", all_at(1));
  check_tag_values(a, "step-2", all_at(2));
  CHECK(a.entry_names().back() == "tags.txt");
  CHECK(a.verify().empty());
  barrier();
}

namespace {

// Checks the updater state of `tag` as stage_updater(m_version) staged it.
void check_updater_values(const Archive& a, const std::string& tag, int m_version) {
  for (const auto& p : model_defs()) {
    if (numel_of(p.shape) == 0) continue;
    CAPTURE(p.name);
    for (const auto& s : updater_state_names())
      CHECK(floats_of(a.updater_state(p.name, s, tag)) ==
            global_values(state_def(p, s), s == "M" ? m_version : 1));
    CHECK(floats_of(a.updater_state(p.name, "step", tag)) == floats_of(step_state(p, 1)));
  }
}

// A step's model: the big parameters never change (dedup references them
// across tags, from the tag that wrote them, which rotation removes), the
// others are at version `step`.
Versions rolling_versions(int step) {
  return [step](const std::string& name) {
    return name == "big" || name == "conv.weight" || name == "empty" ? 1 : step;
  };
}

}  // namespace

TEST_CASE("rolling collective saves: keep_last and replace in the commit, the file stays bounded") {
  const int r = comm().rank(), n = comm().size();
  SharedDir dir;
  const fs::path path = dir / "roll.zip";
  std::uint64_t two_tags_size = 0, largest = 0;
  bool shrank = false;
  for (int step = 1; step <= 8; ++step) {
    CAPTURE(step);
    const std::string tag = "step-" + std::to_string(step);
    CollectiveWriter w(path, comm());
    stage_model(w, r, n, rolling_versions(step));
    stage_updater(w, r, n, step);  // "V" and "step" unchanged: updater.txt references too
    const CollectiveStats st = w.commit(tag, CollectiveCommitOptions{.keep_last = 2});
    if (step > 1) CHECK(st.blobs_deduplicated > 0);
    const Archive a = Archive::open(path);
    const std::vector<std::string> expected =
        step == 1 ? std::vector<std::string>{tag}
                  : std::vector<std::string>{"step-" + std::to_string(step - 1), tag};
    CHECK(a.tags() == expected);
    for (int k = std::max(1, step - 1); k <= step; ++k) {
      check_tag_values(a, "step-" + std::to_string(k), rolling_versions(k));
      check_updater_values(a, "step-" + std::to_string(k), k);
    }
    CHECK(a.verify().empty());
    const std::uint64_t size = fs::file_size(path);
    if (step == 2) two_tags_size = size;
    shrank = shrank || size < largest;  // the root rewrote the mostly free archive
    largest = std::max(largest, size);
    // Two tags' live data (about what two_tags_size is), at most as many
    // free bytes before the root rewrites, and one save's entries.
    if (step > 2) CHECK(size <= 3 * two_tags_size);
  }
  CHECK(shrank);
  if (r == 0) {
    MESSAGE("rolling archive: " << two_tags_size << " bytes with 2 tags, largest " << largest
                                << " over 8 saves keeping 2");
    testing::check_zip_structure(path);
  }

  // replace: the newest tag again, then an older one (it becomes the newest).
  {
    CollectiveWriter w(path, comm());
    stage_model(w, r, n, all_at(20));
    CHECK_THROWS_WITH_AS(w.commit("STEP-8"), doctest::Contains("CollectiveCommitOptions::replace"),
                         Error);
    w.commit("STEP-8", CollectiveCommitOptions{.replace = true});
    stage_model(w, r, n, rolling_versions(7));  // step-7's values: all references
    stage_updater(w, r, n, 7);
    w.commit("step-7", CollectiveCommitOptions{.replace = true, .keep_last = 2});
  }
  {
    const Archive a = Archive::open(path);
    CHECK(a.tags() == std::vector<std::string>{"STEP-8", "step-7"});
    check_tag_values(a, "STEP-8", all_at(20));
    check_tag_values(a, "step-7", rolling_versions(7));
    check_updater_values(a, "step-7", 7);
    CHECK(a.verify().empty());
  }

  // Invalid rotations fail on every rank before anything is written.
  const std::string before = testing::io_bytes(path);
  {
    CollectiveWriter w(path, comm());
    stage_model(w, r, n, all_at(30));
    try {
      w.commit("step-9", CollectiveCommitOptions{.keep_last = 0});
      FAIL("keep_last 0 committed");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_argument);
      CHECK(std::string(e.what()).find("keep_last needs at least 1") != std::string::npos);
      CHECK(same_on_every_rank(e.what()));
    }
    if (n > 1) {
      try {
        w.commit("step-9", CollectiveCommitOptions{.keep_last = r == 1 ? 3u : 2u});
        FAIL("different keep_last values committed");
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::invalid_argument);
        CHECK(std::string(e.what()).find("every rank passes the same") != std::string::npos);
        CHECK(same_on_every_rank(e.what()));
      }
      // A tag that differs between ranks (a rank-local step counter): the
      // root's tag was committed with every rank's shards.
      try {
        w.commit(r == 1 ? "step-10" : "step-9");
        FAIL("different tags committed");
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::invalid_argument);
        CHECK(std::string(e.what()).find("rank 1 commits tag 'step-10', the root rank 0 tag "
                                         "'step-9' (every rank passes the same)") !=
              std::string::npos);
        CHECK(same_on_every_rank(e.what()));
      }
    }
    CHECK(testing::io_bytes(path) == before);
    // The staged parameters are kept for a retry.
    w.commit("step-9", CollectiveCommitOptions{.keep_last = 1});
  }
  {
    const Archive a = Archive::open(path);
    CHECK(a.tags() == std::vector<std::string>{"step-9"});
    check_tag_values(a, "step-9", all_at(30));
    CHECK(a.verify().empty());
  }
  barrier();
}

TEST_CASE(
    "a rotating commit failing at any write or fsync of the root: the old archive or the new") {
  const int r = comm().rank(), n = comm().size();
  SharedDir dir;
  const fs::path base = dir / "base.zip", path = dir / "faults.zip";
  for (int step = 1; step <= 3; ++step) {
    CollectiveWriter w(base, comm());
    stage_model(w, r, n, rolling_versions(step));
    stage_updater(w, r, n, step);
    w.commit("step-" + std::to_string(step));
  }
  const std::string before = testing::io_bytes(base);
  const std::vector<std::string> old_tags{"step-1", "step-2", "step-3"},
      new_tags{"step-3", "step-4"};
  for (io::SysOp kind : {io::SysOp::write, io::SysOp::fsync_file, io::SysOp::truncate}) {
    const std::string kind_name = io::sys_op_name(kind);
    CAPTURE(kind_name);
    bool completed = false;
    int outcomes[2] = {0, 0};  // failed leaving the old archive, the new one
    for (std::uint64_t k = 1; k <= 300 && !completed; ++k) {
      CAPTURE(k);
      if (r == 0) testing::write_file(path, before);
      barrier();
      CollectiveWriter w(path, comm());
      stage_model(w, r, n, rolling_versions(4));  // step-1's references move to step-3
      stage_updater(w, r, n, 4);
      io::FaultInjector fail(io::FaultInjector::Plan{
          .action = io::FaultInjector::Action::fail, .kind = kind, .nth = k});
      if (r == 0) fail.install();
      std::string message;
      try {
        w.commit("step-4", CollectiveCommitOptions{.keep_last = 2});
      } catch (const Error& e) {
        message = e.what();
      }
      fail.uninstall();
      CHECK(same_on_every_rank(message));
      completed = comm().broadcast(fail.fired() ? "0" : "1", 0) == "1";
      if (completed) CHECK(message.empty());
      const Archive a = Archive::open(path);
      if (a.tags() == old_tags) {
        CHECK_FALSE(message.empty());
        CHECK(testing::io_bytes(path) == before);
        ++outcomes[0];
      } else {
        CHECK(a.tags() == new_tags);
        check_tag_values(a, "step-3", rolling_versions(3));
        check_tag_values(a, "step-4", rolling_versions(4));
        check_updater_values(a, "step-3", 3);
        check_updater_values(a, "step-4", 4);
        CHECK(a.verify().empty());
        if (!completed) ++outcomes[1];
      }
      if (r == 0) CHECK(others_in(dir.path(), "faults.zip") == std::set<std::string>{"base.zip"});
      barrier();
    }
    CHECK(completed);
    if (r == 0)
      MESSAGE(kind_name << ": " << outcomes[0] << " failures left the old "
                        << "archive, " << outcomes[1] << " the new one");
  }
  barrier();
}

TEST_CASE("background collective saves rotate in their commit") {
  const int r = comm().rank(), n = comm().size();
  SharedDir dir;
  const fs::path path = dir / "bg-roll.zip";
  std::optional<MpiCommunicator> saves;
  saves.emplace(MPI_COMM_WORLD, std::chrono::seconds(60));
  {
    CollectiveWriter w(path, *saves);
    std::vector<BackgroundCollectiveSave> started;
    for (int step = 1; step <= 6; ++step) {
      stage_model(w, r, n, rolling_versions(step));
      started.push_back(BackgroundCollectiveSave::start(
          w, "step-" + std::to_string(step), BackgroundCollectiveOptions{.keep_last = 2}));
    }
    for (auto& s : started) s.wait();
    stage_model(w, r, n, all_at(40));
    BackgroundCollectiveSave again = BackgroundCollectiveSave::start(
        w, "step-6", BackgroundCollectiveOptions{.replace = true, .keep_last = 2});
    again.wait();
    // keep_last 0 fails the save on every rank (wait() throws it).
    stage_model(w, r, n, all_at(41));
    BackgroundCollectiveSave bad =
        BackgroundCollectiveSave::start(w, "step-7", BackgroundCollectiveOptions{.keep_last = 0});
    CHECK_THROWS_WITH_AS(bad.wait(), doctest::Contains("keep_last needs at least 1"), Error);
  }
  const Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"step-5", "step-6"});
  check_tag_values(a, "step-5", rolling_versions(5));
  check_tag_values(a, "step-6", all_at(40));
  CHECK(a.verify().empty());
  saves.reset();
  barrier();
}

TEST_CASE("a collective commit refuses a tag with graph.fb that verify would reject") {
  // The root checks the tag as Writer::commit does (GRAPH.md section 4) in
  // its planning step: full shapes of sharded values, dedup references and
  // shares included; a broken rule is the same Error on every rank, naming
  // the tag and the entry, and nothing is written.
  const int r = comm().rank(), n = comm().size();
  SharedDir dir;
  const fs::path path = dir / "graph.zip";
  const training::TrainingConfig config = [] {
    training::TrainingConfig t;
    t.updater = training::Adam{0.01};
    t.feature_mapping = {"x"};
    t.label_mapping = {"label"};
    t.loss_variables = {"loss"};
    t.iteration_count = 3;
    return t;
  }();
  const std::vector<std::pair<std::string, Shape>> variables = {
      {"w1", {2, 3}}, {"b1", {3}}, {"w2", {3, 1}}, {"b2", {1}}};
  auto ramp = [](const Shape& s, float start) {
    std::vector<float> v(numel_of(s));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = start + 0.25f * static_cast<float>(i);
    return v;
  };
  // `global` split by rows over every rank (parts beyond its rows empty).
  auto stage_rows = [&](CollectiveWriter& w, const std::string& name, const std::string& state,
                        const Shape& global, float start) {
    const Block b = split_block(global, 0, r, n);
    Tensor t = float_tensor(b.shape, block_values(ramp(global, start), global, b));
    if (state.empty())
      w.add_shard(name, std::move(t), global, b);
    else
      w.add_updater_shard(name, state, std::move(t), global, b);
  };
  struct Staging {
    bool graph = true;
    std::optional<training::TrainingConfig> config;
    Shape w1{2, 3};            // w1's global shape
    std::string skip;          // a variable not staged
    bool share_scale = false;  // "scale" shared from the tag "good"
    std::string w1_from;       // w1 shared from this parameter of "good"
  };
  auto stage = [&](CollectiveWriter& w, const Staging& s) {
    if (s.graph && r == 0)
      w.set_entry(std::string(kGraphEntryName), graph::encode_graph(testing::mlp_graph()));
    if (s.config && r == n - 1)
      w.set_entry(std::string(kTrainingConfigEntryName),
                  training::encode_training_config(*s.config));
    if (r == n - 1 && s.share_scale)
      w.share("scale", "good", "scale");
    else if (r == n - 1)
      w.add("scale", float_tensor({2}, {1.0f, 0.5f}));
    for (std::size_t i = 0; i < variables.size(); ++i) {
      const auto& [name, shape] = variables[i];
      if (name == s.skip) continue;
      if (name == "w1" && !s.w1_from.empty()) {
        if (r == 0) w.share(name, "good", s.w1_from);
      } else if (name == "w1")
        stage_rows(w, name, "", s.w1, 1.0f);
      else if (static_cast<int>(i) % n == r)
        w.add(name, float_tensor(shape, ramp(shape, static_cast<float>(i))));
      stage_rows(w, name, "M", shape, 10.0f + static_cast<float>(i));
      stage_rows(w, name, "V", shape, 20.0f + static_cast<float>(i));
    }
  };
  {
    CollectiveWriter w(path, comm());
    stage(w, Staging{.config = config});
    w.commit("good");
  }
  {  // dedup references (every value as in "good") and shares pass the check
    CollectiveWriter w(path, comm());
    stage(w, Staging{.config = config, .share_scale = true});
    CHECK(w.commit("again").blobs_deduplicated == 12);
  }
  {
    const Archive a = Archive::open(path);
    CHECK(a.verify().empty());
    for (const char* tag : {"good", "again"}) {
      const Checkpoint c = load_checkpoint(a, tag);
      CHECK((c.params.at("w1").shape() == Shape{2, 3}));
      CHECK(c.training == config);
    }
  }
  barrier();
  const std::string before = testing::io_bytes(path);
  training::TrainingConfig lost = config;
  lost.loss_variables = {"lost"};
  struct Case {
    std::string tag, entry, text;
    Staging staging;
  };
  const std::vector<Case> cases = {
      {"missing", "params.txt", "variable 'b2' (float32 [1]) has no parameter",
       Staging{.config = config, .skip = "b2"}},
      {"shape", "params.txt", "parameter 'w1' has shape [3, 3], but variable 'w1'",
       Staging{.config = config, .w1 = {3, 3}}},
      {"shared", "params.txt", "parameter 'w1' has shape [3, 1], but variable 'w1'",
       Staging{.config = config, .w1_from = "w2"}},
      {"loss", "trainingConfig.fb",
       "training config loss variable 'lost' is not a variable of the graph",
       Staging{.config = lost}},
      {"no-config", "updater.txt", "the checkpoint has updater state but no training config",
       Staging{}},
  };
  for (const Case& k : cases) {
    CAPTURE(k.tag);
    CollectiveWriter w(path, comm());
    stage(w, k.staging);
    std::string message;
    std::optional<Error> error;
    try {
      w.commit(k.tag);
    } catch (const Error& e) {
      message = e.what();
      error = e;
    }
    CHECK(error.has_value());  // the same on every rank
    if (!error) {
      barrier();
      continue;
    }
    CHECK(error->code() == ErrorCode::invalid_argument);
    CHECK(message.find(k.text) != std::string::npos);
    CHECK(message.find("schemas/GRAPH.md section 4") != std::string::npos);
    CHECK(error->context().entry == k.tag + "/" + k.entry);
    CHECK(error->context().tag == k.tag);
    CHECK(error->context().archive == path.string());
    CHECK(same_on_every_rank(message));
    if (r == 0) {
      CHECK(testing::io_bytes(path) == before);
      CHECK(others_in(dir.path(), "graph.zip").empty());
    }
    barrier();
  }
  // The same tag without graph.fb is no graph checkpoint: not checked.
  {
    CollectiveWriter w(path, comm());
    stage(w, Staging{.graph = false, .config = lost, .skip = "b2"});
    w.commit("plain");
  }
  CHECK(Archive::open(path).verify().empty());
  barrier();
}

TEST_CASE("collective commits of text: replicated or on one rank, a single writer's archive") {
  const int r = comm().rank(), n = comm().size();
  SharedDir dir;
  const fs::path path = dir / "text.zip";
  const std::vector<std::string> vocab_words = {"<pad>", "caf\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac",
                                                ""};
  const Tensor vocab = Tensor::strings({2, 2}, vocab_words);
  auto one = [](const std::string& s) { return Tensor::strings({}, std::vector<std::string>{s}); };
  const Tensor notes = Tensor::strings({2}, std::vector<std::string>{"warm", "up"});
  const Shape w_shape{5, 3};
  auto w_values = [&](int version) {
    std::vector<float> v(15);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i + 100 * version);
    return v;
  };
  // Rows of "w" on every rank, the vocabulary replicated on every rank, the
  // run id on the last one, an updater state's text on the first one; the
  // text lies between the ranks' blobs in the file.
  auto stage = [&](CollectiveWriter& w, int version, const std::string& run) {
    const Block rows = split_block(w_shape, 0, r, n);
    w.add_shard("w", float_tensor(rows.shape, block_values(w_values(version), w_shape, rows)),
                w_shape, rows);
    w.add("vocab", vocab);
    if (r == n - 1) w.add("run", one(run));
    if (r == 0) w.add_updater_state("w", "notes", notes);
  };
  auto single_tag = [&](int version, const std::string& run) {
    NewTag t;
    t.add("w", float_tensor(w_shape, w_values(version)));
    t.add("vocab", vocab);
    t.add("run", one(run));
    t.add_updater_state("w", "notes", notes);
    return t;
  };
  {
    CollectiveWriter w(path, comm());
    stage(w, 1, "run-7");
    const CollectiveStats st = w.commit("step-1");
    CHECK(st.blobs_written == 4);
  }
  {
    CollectiveWriter w(path, comm());
    stage(w, 1, "run-8");  // "w", the vocabulary and the notes unchanged: references
    const CollectiveStats st = w.commit("step-2");
    CHECK(st.blobs_written == 1);
    CHECK(st.blobs_deduplicated == 3);
  }
  {
    // The run id returns to step-1's value, which its namesake in the newest
    // tag does not hold: found in step-1, as the single writer finds it.
    CollectiveWriter w(path, comm());
    stage(w, 1, "run-7");
    const CollectiveStats st = w.commit("step-3");
    CHECK(st.blobs_written == 0);
    CHECK(st.blobs_deduplicated == 4);
  }
  Archive a = Archive::open(path);
  CHECK(a.verify().empty());
  CHECK(a.tensor("vocab", "step-2") == vocab);
  CHECK(a.tensor("run", "step-1").string_at(0) == "run-7");
  CHECK(a.tensor("run", "step-2").string_at(0) == "run-8");
  CHECK(a.tensor("run", "step-3").string_at(0) == "run-7");
  CHECK(a.param("run", "step-3").owner_tag == "step-1");
  CHECK(a.updater_state("w", "notes", "step-2") == notes);
  CHECK(a.param("vocab", "step-2").owner_tag == "step-1");
  std::string mismatch;
  if (r == 0) {
    testing::check_zip_structure(path);
    const fs::path single = dir / "single.zip";
    {
      Writer w = Writer::open(single);
      w.add_tag("step-1", single_tag(1, "run-7"));
      w.commit();
      w.add_tag("step-2", single_tag(1, "run-8"));
      w.commit();
      w.add_tag("step-3", single_tag(1, "run-7"));
      w.commit();
    }
    CHECK(testing::io_bytes(path) == testing::io_bytes(single));  // byte for byte
    CHECK(std::system(("unzip -tqq " + path.string()).c_str()) == 0);
    CHECK(run_python("import zipfile,sys\nz=zipfile.ZipFile('" + path.string() +
                     "')\nsys.exit(1 if z.testzip() is not None else 0)\n") == 0);
  }
  barrier();

  // Text whose ranks disagree, or that clashes with a tensor or a share of
  // the same name on another rank: the same error on every rank, naming the
  // name and the ranks; nothing written. Text is not staged in blocks.
  const std::string before = testing::io_bytes(path);
  struct Case {
    const char* name;
    std::function<void(CollectiveWriter&)> stage;
    std::string expect;
  };
  const std::string last = std::to_string(n - 1);
  const std::vector<Case> cases = {
      {"different text", [&](CollectiveWriter& w) { w.add("run", one(r == n - 1 ? "b" : "a")); },
       "parameter 'run': rank 0 and rank " + last + " stage different text"},
      {"text and a tensor",
       [&](CollectiveWriter& w) {
         if (r == n - 1) w.add("x", float_tensor({1}, {1.0f}));
         if (r == 0) w.add("x", one("x"));
       },
       "parameter 'x': rank 0 stages text, rank " + last + " a tensor"},
      {"text and a share",
       [&](CollectiveWriter& w) {
         if (r == n - 1) w.share("vocab", "step-1", "vocab");
         if (r == 0) w.add("vocab", vocab);
       },
       "parameter 'vocab': rank 0 stages text, rank " + last + " a share of tag 'step-1'"},
      {"updater text",
       [&](CollectiveWriter& w) { w.add_updater_state("w", "notes", one(r == n - 1 ? "b" : "a")); },
       "updater state 'notes' of 'w': rank 0 and rank " + last + " stage different text"},
  };
  for (const auto& c : cases) {
    if (n < 2) continue;
    CAPTURE(c.name);
    CollectiveWriter w(path, comm());
    c.stage(w);
    std::string message;
    try {
      w.commit("step-4");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_argument);
      message = e.what();
    }
    CAPTURE(message);
    CHECK(message.find(c.expect) != std::string::npos);
    CHECK(same_on_every_rank(message));
    if (r == 0) {
      CHECK(testing::io_bytes(path) == before);
      CHECK(others_in(dir.path(), "text.zip").count("single.zip") == 1);
      CHECK(others_in(dir.path(), "text.zip").size() == 1);
    }
  }
  {
    CollectiveWriter w(path, comm());
    CHECK_ERROR(w.add_shard("t", vocab, {4, 2}, Block{{0, 0}, {2, 2}}), ErrorCode::unsupported,
                "parameter 't': text is staged whole");
    const std::vector<std::int64_t> at = {1};
    const Tensor sparse =
        Tensor::sparse_coo(DType::float32, {4}, 1, Bytes::copy_of(std::as_bytes(std::span(at))),
                           Bytes::copy_of(std::string(4, '\0')));
    CHECK_ERROR(w.add("s", sparse), ErrorCode::unsupported,
                "parameter 's': distributed saves take dense tensors of fixed-size types, or text");
  }

  // A background save copies text when it is staged: a buffer the strings
  // were borrowed from may change right after start().
  {
    std::optional<MpiCommunicator> saves;
    saves.emplace(MPI_COMM_WORLD, std::chrono::seconds(60));
    std::string values = "abc";
    const std::vector<std::uint64_t> offsets = {0, 3};
    CollectiveWriter w(path, *saves);
    w.add("run", Tensor::strings({1}, Bytes::copy_of(std::as_bytes(std::span(offsets))),
                                 Bytes::borrow(std::as_bytes(std::span(values)), nullptr)));
    BackgroundCollectiveSave save = BackgroundCollectiveSave::start(w, "step-4");
    values = "xyz";
    CHECK(save.wait().blobs_written == 1);
    CHECK(Archive::open(path).tensor("run", "step-4").string_at(0) == "abc");
  }
  barrier();
}

TEST_CASE("text of any size: its bytes travel only to be compared, in rounds") {
  // Measured: the messages of a commit. Text once went to the root in the
  // records: a replicated value over 2 GiB failed with "MPI gather: more
  // than 2 GiB from one rank" (naming no parameter), and one staged by a
  // single rank left the others in the gather until the time-out. A text
  // staged by several ranks goes from its writer to the others, which
  // compare it byte for byte, in rounds (here of 16 KiB), unless every rank
  // found it in the archive; one staged by one rank never travels.
  constexpr std::size_t kChunk = 16 << 10;
  SmallChunks small(kChunk);
  const int r = comm().rank(), n = comm().size();
  SharedDir dir;
  const fs::path path = dir / "big_text.zip";
  const std::string big(std::size_t{4} << 20, 'v');  // 4 MiB
  const Tensor replicated = Tensor::strings({2}, std::vector<std::string>{big, "end"});
  const Tensor alone = Tensor::strings({}, std::vector<std::string>{big + "!"});
  {
    Measuring measuring(comm());
    CollectiveWriter w(path, measuring);
    w.add("vocab", replicated);
    if (r == n - 1) w.add("notes", alone);
    const CollectiveStats st = w.commit("step-1");
    CHECK(st.blobs_written == 2);
    CAPTURE(measuring.largest);
    CHECK(measuring.largest <= kChunk + 64);
    CAPTURE(measuring.total);  // the vocabulary, once with several ranks
    CHECK(measuring.total < (n > 1 ? big.size() + (256u << 10) : (64u << 10)));
  }
  {
    Measuring measuring(comm());
    CollectiveWriter w(path, measuring);
    w.add("vocab", replicated);
    if (r == n - 1) w.add("notes", alone);
    const CollectiveStats st = w.commit("step-2");  // references, found by the ranks
    CHECK(st.blobs_deduplicated == 2);
    CHECK(measuring.largest <= kChunk + 64);
    CAPTURE(measuring.total);
    CHECK(measuring.total < (64u << 10));  // found in step-1 by every rank: no text travels
  }
  Archive a = Archive::open(path);
  CHECK(a.verify().empty());
  CHECK(a.tensor("vocab", "step-2") == replicated);
  CHECK(a.tensor("notes", "step-2") == alone);
  CHECK(a.param("notes", "step-2").owner_tag == "step-1");
  if (r == 0) {
    const fs::path single = dir / "single.zip";
    {
      Writer w = Writer::open(single);
      for (const std::string tag : {"step-1", "step-2"}) {
        NewTag t;
        t.add("vocab", replicated);
        t.add("notes", alone);
        w.add_tag(tag, std::move(t));
        w.commit();
      }
    }
    CHECK(testing::io_bytes(path) == testing::io_bytes(single));  // byte for byte
  }
  barrier();
}

TEST_CASE("text dedup reads the old archive's directory once per commit, not once per text") {
  // Each text is looked for among the old blobs of its size and CRC-32: an
  // index of the directory built once per commit, where each text once
  // scanned the whole directory (texts x entries).
  SharedDir dir;
  const fs::path path = dir / "many_texts.zip";
  auto text = [](int i, int version) {
    return Tensor::strings(
        {}, std::vector<std::string>{"text " + std::to_string(i) + " v" + std::to_string(version)});
  };
  constexpr int kTexts = 16;
  for (int version = 1; version <= 3; ++version) {
    const std::uint64_t entries =
        version == 1 ? 0 : checkpoint::ArchiveState(Archive::open(path)).directory().entries.size();
    CollectiveWriter w(path, comm());
    for (int i = 0; i < kTexts; ++i) w.add("t" + std::to_string(i), text(i, version));
    const std::uint64_t before = dist::text_dedup_entries_examined();
    const CollectiveStats st = w.commit("step-" + std::to_string(version));
    CHECK(st.blobs_written == kTexts);
    const std::uint64_t examined = dist::text_dedup_entries_examined() - before;
    if (version == 1) {
      CHECK(examined == 0);  // a new archive: nothing to look at
      continue;
    }
    // The old archive's entries, each once.
    CAPTURE(examined);
    CAPTURE(entries);
    CHECK(examined > 0);
    CHECK(examined <= entries);
  }
  {
    CollectiveWriter w(path, comm());  // step-2's values again: found in step-2
    for (int i = 0; i < kTexts; ++i) w.add("t" + std::to_string(i), text(i, 2));
    CHECK(w.commit("step-4").blobs_deduplicated == kTexts);
  }
  Archive a = Archive::open(path);
  CHECK(a.verify().empty());
  CHECK(a.param("t3", "step-4").owner_tag == "step-2");
  CHECK(a.tensor("t3", "step-4") == text(3, 2));
  barrier();
}

TEST_CASE("tag-level entries of any size reach the root in messages of a bounded size") {
  // Entries travel to the root in the records, which go in rounds of at
  // most dist::message_chunk_bytes (64 MiB) per rank: one message of them
  // all was limited to 2 GiB by MPI. Here with 4 KiB rounds.
  const int r = comm().rank(), n = comm().size();
  SharedDir dir;
  const fs::path path = dir / "entries.zip";
  constexpr std::size_t kChunk = 4096;
  SmallChunks small(kChunk);
  auto contents = [](int rank) {
    std::string s(50000 + 1000 * static_cast<std::size_t>(rank), '\0');
    for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>('a' + (i * 7 + rank) % 26);
    return s;
  };
  auto name = [](int rank) { return "notes-" + std::to_string(rank) + ".txt"; };
  Measuring measuring(comm());
  {
    CollectiveWriter w(path, measuring);
    if (r == 0) w.add("w", float_tensor({2}, {1.0f, 2.0f}));
    if (r != n - 1 || n == 1) w.set_entry(name(r), Bytes::copy_of(contents(r)));  // not on all
    CHECK(w.commit("step-1").blobs_written == 1);
  }
  CAPTURE(measuring.largest);
  CHECK(measuring.largest <= kChunk + 64);
  const Archive a = Archive::open(path);
  CHECK(a.verify().empty());
  for (int k = 0; k < n; ++k)
    if (k != n - 1 || n == 1) CHECK(a.entry("step-1/" + name(k)).as_string_view() == contents(k));
  barrier();
}

TEST_CASE("text that differs between ranks fails the commit even when its size and CRC-32 match") {
  // The ranks' texts of one name were compared by size and CRC-32 only:
  // two texts of the same CRC were taken for one, and one rank's text was
  // silently lost. Now the ranks compare them byte for byte.
  const int r = comm().rank(), n = comm().size();
  const auto [first, second] = texts_of_one_crc();
  REQUIRE(first != second);
  REQUIRE(first.size() == second.size());
  REQUIRE(text_blob_crc(first) == text_blob_crc(second));
  if (n < 2) return;
  SharedDir dir;
  const fs::path path = dir / "collide.zip";
  auto one = [](const std::string& s) { return Tensor::strings({}, std::vector<std::string>{s}); };
  {
    CollectiveWriter w(path, comm());
    w.add("run", one("run-1"));
    w.commit("step-1");
  }
  const std::string before = testing::io_bytes(path);
  for (const bool dedup : {true, false}) {
    CAPTURE(dedup);
    CollectiveWriter w(path, comm(), CollectiveOptions{.dedup = dedup});
    w.add("run", one(r == n - 1 ? second : first));
    std::string message;
    try {
      w.commit("step-2");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_argument);
      message = e.what();
    }
    CAPTURE(message);
    CHECK(message.find("parameter 'run': rank 0 and rank " + std::to_string(n - 1) +
                       " stage different text") != std::string::npos);
    CHECK(same_on_every_rank(message));
    if (r == 0) CHECK(testing::io_bytes(path) == before);
  }
  {
    CollectiveWriter w(path, comm());  // the same text everywhere: one blob
    w.add("run", one(second));
    CHECK(w.commit("step-2").blobs_written == 1);
  }
  CHECK(Archive::open(path).tensor("run", "step-2").string_at(0) == second);
  barrier();
}

TEST_CASE("equal texts of two names in one new tag: one blob, as the single writer stores them") {
  // Each was stored: the single writer stores one and references it
  // (Writer's dedup within the tag). Texts of one CRC-32 but other bytes
  // stay two blobs.
  const int r = comm().rank(), n = comm().size();
  SharedDir dir;
  auto one = [](const std::string& s) { return Tensor::strings({}, std::vector<std::string>{s}); };
  const auto [first, second] = texts_of_one_crc();
  const Tensor vocab = Tensor::strings({3}, std::vector<std::string>{"<pad>", "the", "a"});
  struct Case {
    const char* name;
    int a_rank, b_rank;  // the ranks that stage "a" and "b" (both "vocab")
  };
  for (const Case& c :
       {Case{"one rank", 0, 0}, Case{"two ranks", 0, n - 1}, Case{"two other ranks", n - 1, 0}}) {
    CAPTURE(c.name);
    const fs::path path = dir / (std::string(c.name) + ".zip");
    for (const bool dedup : {true, false}) {
      CAPTURE(dedup);
      fs::remove(path);
      barrier();
      {
        CollectiveWriter w(path, comm(), CollectiveOptions{.dedup = dedup});
        if (r == c.a_rank) w.add("a", vocab);
        if (r == n - 1) w.add("x", one(first));
        if (r == c.b_rank) w.add("b", vocab);
        if (r == 0) w.add("y", one(second));  // x's CRC-32, other bytes
        const CollectiveStats st = w.commit("step-1");
        CHECK(st.blobs_written == (dedup ? 3 : 4));
        CHECK(st.blobs_deduplicated == (dedup ? 1 : 0));
      }
      const Archive a = Archive::open(path);
      CHECK(a.verify().empty());
      CHECK(a.tensor("a") == vocab);
      CHECK(a.tensor("b") == vocab);
      CHECK(a.tensor("x").string_at(0) == first);
      CHECK(a.tensor("y").string_at(0) == second);
      CHECK((a.param("a").blob == a.param("b").blob) == dedup);
      if (r == 0) {  // byte for byte the single writer's
        const fs::path single = dir / "single.zip";
        fs::remove(single);
        Writer w = Writer::open(single, WriterOptions{.dedup = dedup});
        NewTag t;
        for (int k = 0; k < n; ++k) {  // the collective's order: by rank, then staging
          if (k == c.a_rank) t.add("a", vocab);
          if (k == n - 1) t.add("x", one(first));
          if (k == c.b_rank) t.add("b", vocab);
          if (k == 0) t.add("y", one(second));
        }
        w.add_tag("step-1", std::move(t));
        w.commit();
        CHECK(testing::io_bytes(path) == testing::io_bytes(single));
      }
      barrier();
    }
  }
}

TEST_CASE(
    "text found among old blobs of its size and CRC-32: the oldest with its bytes, as the "
    "single writer picks it") {
  // step-1 holds a text of the new text's CRC-32 but other bytes, then the
  // new text; step-2 holds the new text twice more (written without
  // dedup). The new text's name is in no old tag: the first candidate in
  // the order (oldest tag, then index) is compared and refused, the second
  // is the one; the copies in step-2 are not.
  const int r = comm().rank(), n = comm().size();
  SharedDir dir;
  const fs::path path = dir / "oldest.zip";
  const fs::path single = dir / "single.zip";
  auto one = [](const std::string& s) { return Tensor::strings({}, std::vector<std::string>{s}); };
  const auto [first, second] = texts_of_one_crc();
  if (r == 0) {
    Writer w = Writer::open(path, WriterOptions{.dedup = false});
    NewTag t1;
    t1.add("other", one(second));
    t1.add("kept", one(first));
    w.add_tag("step-1", std::move(t1));
    w.commit();
    NewTag t2;
    t2.add("kept", one(first));
    t2.add("copy", one(first));
    w.add_tag("step-2", std::move(t2));
    w.commit();
    fs::copy_file(path, single, fs::copy_options::overwrite_existing);
  }
  barrier();
  {
    CollectiveWriter w(path, comm());
    if (r == n - 1) w.add("new", one(first));
    const CollectiveStats st = w.commit("step-3");
    CHECK(st.blobs_written == 0);
    CHECK(st.blobs_deduplicated == 1);
  }
  const Archive a = Archive::open(path);
  CHECK(a.param("new", "step-3").blob == a.param("kept", "step-1").blob);
  CHECK(a.tensor("new", "step-3").string_at(0) == first);
  if (r == 0) {
    {
      Writer w = Writer::open(single);
      NewTag t;
      t.add("new", one(first));
      w.add_tag("step-3", std::move(t));
      w.commit();
    }
    CHECK(testing::io_bytes(path) == testing::io_bytes(single));  // byte for byte
  }
  barrier();
}

TEST_CASE("many text parameters in one tag: each text stored once, as the single writer does") {
  // The root matched each text with the equal ones before it (and with its
  // copies on other ranks) by scanning every earlier parameter and every
  // check; these are hash lookups now. Many texts, each content under many
  // names, some names on two ranks, two contents of one CRC-32: the same
  // blobs, references and bytes as the single writer's.
  const int r = comm().rank(), n = comm().size();
  SharedDir dir;
  const std::pair<std::string, std::string> one_crc = texts_of_one_crc();
  constexpr int kTexts = 400, kDistinct = 40;
  auto content = [&](int i) {
    if (i % 50 == 3) return one_crc.first;
    if (i % 50 == 4) return one_crc.second;  // the first's CRC-32, other bytes
    const int j = i % kDistinct;             // texts of several sizes
    return "text " + std::to_string(j) + std::string(static_cast<std::size_t>(j % 7), '.');
  };
  auto tensor_of = [](const std::string& s) {
    return Tensor::strings({}, std::vector<std::string>{s});
  };
  // Name i on rank i % n, and every 7th also on the next rank.
  auto stages = [&](int rank, int i) {
    return i % n == rank || (i % 7 == 0 && (i + 1) % n == rank);
  };
  const fs::path path = dir / "texts.zip";
  const fs::path single = dir / "single.zip";
  for (const bool dedup : {true, false}) {
    CAPTURE(dedup);
    fs::remove(path);
    barrier();
    {
      CollectiveWriter w(path, comm(), CollectiveOptions{.dedup = dedup});
      for (int i = 0; i < kTexts; ++i)
        if (stages(r, i)) w.add("t" + std::to_string(i), tensor_of(content(i)));
      const CollectiveStats st = w.commit("step-1");
      CHECK(st.blobs_written == (dedup ? kDistinct + 2 : kTexts));
      CHECK(st.blobs_deduplicated == (dedup ? kTexts - kDistinct - 2 : 0));
    }
    const Archive a = Archive::open(path);
    CHECK(a.verify().empty());
    CHECK(a.params().size() == kTexts);
    for (int i = 0; i < kTexts; ++i) {
      const std::string name = "t" + std::to_string(i);
      CHECK(a.tensor(name).string_at(0) == content(i));
    }
    if (r == 0) {  // byte for byte the single writer's, in the collective's order
      fs::remove(single);
      Writer w = Writer::open(single, WriterOptions{.dedup = dedup});
      NewTag t;
      std::set<int> added;
      for (int k = 0; k < n; ++k)
        for (int i = 0; i < kTexts; ++i)
          if (stages(k, i) && added.insert(i).second)
            t.add("t" + std::to_string(i), tensor_of(content(i)));
      w.add_tag("step-1", std::move(t));
      w.commit();
      CHECK(testing::io_bytes(path) == testing::io_bytes(single));
    }
    barrier();
  }
}

int main(int argc, char** argv) {
  // Background collective saves call MPI from their own thread while the
  // main thread goes on using MPI (on another communicator).
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "this MPI does not provide MPI_THREAD_MULTIPLE\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int failed = 0;
  {
    MpiCommunicator comm(MPI_COMM_WORLD, std::chrono::seconds(60));
    g_comm = &comm;
    doctest::Context ctx(argc, argv);
    const std::string log = "/tmp/modelzip-dist-test-" + std::to_string(getpid()) + ".log";
    if (comm.rank() != 0) ctx.setOption("out", log.c_str());
    failed = ctx.run() != 0;
    if (comm.rank() != 0) {
      if (failed)
        std::fprintf(stderr, "rank %d:\n%s\n", comm.rank(), testing::io_bytes(log).c_str());
      fs::remove(log);
    }
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    g_comm = nullptr;
  }
  MPI_Finalize();
  return failed;
}
