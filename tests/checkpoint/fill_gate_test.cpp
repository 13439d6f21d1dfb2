// FillGate: ranges filled in any order; a commit under a FillGate::Scope
// writes the tensors whose bytes have arrived while later ones are still
// arriving, and fails (archive unchanged) when the filler fails.
//
// Overlap is observed, not timed: the filler holds back the second tensor
// until the commit's progress says the first one has been written (for at
// most a minute; without overlap that wait would run out and the test
// fail).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "checkpoint/fill_gate.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/error.hpp"
#include "modelzip/writer.hpp"
#include "test_support.hpp"

using namespace modelzip;
using modelzip::detail::FillGate;
using modelzip::testing::TempDir;

namespace {

constexpr std::size_t kTensor = std::size_t{1} << 20;

// A tag of two uint8 tensors "a" and "b" viewing the halves of `memory`.
NewTag two_tensors(const std::vector<std::byte>& memory) {
  NewTag nt;
  const std::span<const std::byte> all(memory);
  nt.add("a", Tensor::dense(DType::uint8, {static_cast<std::int64_t>(kTensor)},
                            Bytes::borrow(all.first(kTensor), nullptr)));
  nt.add("b", Tensor::dense(DType::uint8, {static_cast<std::int64_t>(kTensor)},
                            Bytes::borrow(all.subspan(kTensor, kTensor), nullptr)));
  return nt;
}

// Fills the first half of `memory` at once and the second half once
// `written` reaches a tensor's size (or after a minute); says which.
struct Filler {
  std::vector<std::byte>& memory;
  FillGate& gate;
  std::atomic<std::uint64_t>& written;
  bool fail_second = false;
  bool waited_for_write = false;

  void operator()() {
    std::memset(memory.data(), 1, kTensor);
    gate.filled(0, kTensor);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    while (written.load() < kTensor && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    waited_for_write = written.load() >= kTensor;
    if (fail_second) {
      gate.fail("device lost");
      return;
    }
    std::memset(memory.data() + kTensor, 2, kTensor);
    gate.filled(kTensor, kTensor);
  }
};

WriterOptions counting_writes(std::atomic<std::uint64_t>& written) {
  WriterOptions o;
  o.dedup = false;  // the first read of a tensor is its write
  o.progress = [&written](const Progress& p) {
    if (p.stage == Progress::Stage::work) written = p.bytes_done;
    return true;
  };
  return o;
}

}  // namespace

TEST_CASE("FillGate: ranges filled in any order, waits, failure") {
  std::vector<std::byte> memory(100);
  FillGate gate(memory);
  CHECK(gate.holds({memory.data() + 10, 20}));
  CHECK_FALSE(gate.holds({memory.data() + 90, 20}));
  std::byte elsewhere[4];
  CHECK_FALSE(gate.holds({elsewhere, 4}));
  gate.filled(50, 50);
  gate.filled(0, 10);
  gate.filled(200, 10);  // outside: ignored
  gate.filled(10, 40);   // joins the two
  gate.wait({memory.data(), 100});
  FillGate partial(memory);
  partial.filled(0, 40);
  partial.filled(60, 40);
  partial.fail("device lost");
  CHECK_NOTHROW(partial.wait({memory.data() + 60, 40}));
  CHECK_THROWS_WITH_AS(partial.wait({memory.data() + 30, 20}), doctest::Contains("device lost"),
                       Error);
}

TEST_CASE("FillGate: a commit writes the first tensor while the second is still arriving") {
  TempDir dir;
  const auto path = dir / "m.zip";
  std::vector<std::byte> memory(2 * kTensor);
  auto gate = std::make_shared<FillGate>(memory);
  std::atomic<std::uint64_t> written{0};
  Writer w = Writer::open(path, counting_writes(written));
  w.add_tag("t", two_tensors(memory));
  Filler filler{memory, *gate, written};
  std::thread filling(std::ref(filler));
  {
    const FillGate::Scope arriving({gate});
    w.commit();
  }
  filling.join();
  CHECK(filler.waited_for_write);  // "a" was written before "b" arrived
  Archive a = Archive::open(path);
  CHECK(a.tensor("a", "t").values().span()[0] == std::byte{1});
  CHECK(a.tensor("b", "t").values().span()[kTensor - 1] == std::byte{2});
  CHECK(a.verify().empty());
}

TEST_CASE("FillGate: a failed filler fails the commit and leaves the archive unchanged") {
  TempDir dir;
  const auto path = dir / "m.zip";
  {
    Writer first = Writer::open(path);
    NewTag old;
    old.add("w", Tensor::dense(DType::uint8, {3}, Bytes::copy_of(std::string_view("abc"))));
    first.add_tag("old", std::move(old));
    first.commit();
  }
  const std::string before = testing::io_bytes(path);
  std::vector<std::byte> memory(2 * kTensor);
  auto gate = std::make_shared<FillGate>(memory);
  std::atomic<std::uint64_t> written{0};
  Writer w = Writer::open(path, counting_writes(written));
  w.add_tag("t", two_tensors(memory));
  Filler filler{memory, *gate, written, true};
  std::thread filling(std::ref(filler));
  {
    const FillGate::Scope arriving({gate});
    CHECK_THROWS_WITH_AS(w.commit(), doctest::Contains("device lost"), Error);
  }
  filling.join();
  CHECK(testing::io_bytes(path) == before);
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"old"});
}
