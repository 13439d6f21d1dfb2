// io::DirectWriteChooser and MODELZIP_DIRECT_WRITES: the override, the size
// below which nothing is calibrated, one calibration per device, the
// fallback to the page cache when a calibration fails, and the writer
// following the choice (O_DIRECT opens or none). No timings are asserted.
#include <doctest/doctest.h>
#include <fcntl.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "../zip/expect_error.hpp"
#include "io/direct_write_choice.hpp"
#include "io/syscalls.hpp"
#include "modelzip/modelzip.hpp"
#include "test_support.hpp"

using namespace modelzip;
using modelzip::io::DirectWriteChooser;
using modelzip::io::DirectWrites;
using modelzip::io::WriteTimings;

namespace {

// Sets MODELZIP_DIRECT_WRITES (or unsets it for null) until destroyed.
class DirectWritesEnv {
 public:
  explicit DirectWritesEnv(const char* value) {
    if (const char* old = std::getenv("MODELZIP_DIRECT_WRITES")) old_ = old;
    if (value)
      ::setenv("MODELZIP_DIRECT_WRITES", value, 1);
    else
      ::unsetenv("MODELZIP_DIRECT_WRITES");
  }
  ~DirectWritesEnv() {
    if (old_)
      ::setenv("MODELZIP_DIRECT_WRITES", old_->c_str(), 1);
    else
      ::unsetenv("MODELZIP_DIRECT_WRITES");
  }

 private:
  std::optional<std::string> old_;
};

constexpr std::uint64_t kLarge = io::kCalibrateFrom, kSmall = io::kCalibrateFrom - 1;

}  // namespace

TEST_CASE("MODELZIP_DIRECT_WRITES: 0, 1, auto or unset; anything else is an error") {
  {
    DirectWritesEnv env(nullptr);
    CHECK(io::direct_writes_setting() == DirectWrites::automatic);
  }
  {
    DirectWritesEnv env("0");
    CHECK(io::direct_writes_setting() == DirectWrites::off);
  }
  {
    DirectWritesEnv env("1");
    CHECK(io::direct_writes_setting() == DirectWrites::on);
  }
  {
    DirectWritesEnv env("auto");
    CHECK(io::direct_writes_setting() == DirectWrites::automatic);
  }
  DirectWritesEnv env("yes");
  const std::optional<Error> e = testing::caught([] { io::direct_writes_setting(); });
  REQUIRE(e);
  CHECK(e->code() == ErrorCode::invalid_argument);
  CHECK(std::string(e->what()).find("MODELZIP_DIRECT_WRITES") != std::string::npos);
}

TEST_CASE("The chooser: overrides, small saves, one calibration per device, failures") {
  int calls = 0;
  std::optional<WriteTimings> next;
  bool fail = false;
  DirectWriteChooser chooser([&](const std::filesystem::path&) -> std::optional<WriteTimings> {
    ++calls;
    if (fail) throw Error(ErrorCode::io, "no space");
    return next;
  });
  // Overrides measure nothing, whatever the size.
  CHECK(chooser.choose(DirectWrites::on, 1, "/x", kLarge));
  CHECK_FALSE(chooser.choose(DirectWrites::off, 1, "/x", kLarge));
  // Small saves are written directly without a calibration.
  CHECK(chooser.choose(DirectWrites::automatic, 1, "/x", kSmall));
  CHECK(calls == 0);
  CHECK_FALSE(chooser.verdict(1));
  // Device 1: direct writes lose; measured once, then kept.
  next = WriteTimings{.direct = 0.02, .buffered = 0.01};
  CHECK_FALSE(chooser.choose(DirectWrites::automatic, 1, "/x", kLarge));
  next = WriteTimings{.direct = 0.01, .buffered = 0.02};
  CHECK_FALSE(chooser.choose(DirectWrites::automatic, 1, "/x", 10 * kLarge));
  CHECK(calls == 1);
  CHECK(chooser.verdict(1) == false);
  // Small saves on a calibrated device still go directly; overrides still win.
  CHECK(chooser.choose(DirectWrites::automatic, 1, "/x", kSmall));
  CHECK(chooser.choose(DirectWrites::on, 1, "/x", kLarge));
  // Device 2: direct writes win (a tie too).
  CHECK(chooser.choose(DirectWrites::automatic, 2, "/y", kLarge));
  CHECK(calls == 2);
  next = WriteTimings{.direct = 0.01, .buffered = 0.01};
  CHECK(chooser.choose(DirectWrites::automatic, 4, "/y", kLarge));
  CHECK(calls == 3);
  // A calibration that cannot measure, or throws, chooses the page cache.
  next.reset();
  CHECK_FALSE(chooser.choose(DirectWrites::automatic, 3, "/z", kLarge));
  fail = true;
  CHECK_FALSE(chooser.choose(DirectWrites::automatic, 5, "/z", kLarge));
  CHECK(calls == 5);
  CHECK(chooser.verdict(5) == false);
}

TEST_CASE("measure_write_paths measures both ways and leaves no file behind") {
  testing::TempDir dir;
  const std::optional<WriteTimings> t = io::measure_write_paths(dir.path());
  // nullopt only where the file system refuses O_DIRECT (tmpfs).
  if (t) {
    CHECK(t->direct > 0);
    CHECK(t->buffered > 0);
  }
  CHECK(std::filesystem::is_empty(dir.path()));
  CHECK_FALSE(io::measure_write_paths(dir / "missing"));
}

TEST_CASE("A durable save follows MODELZIP_DIRECT_WRITES: O_DIRECT opens or none") {
  testing::TempDir dir;
  std::mt19937_64 rng(3);
  const Bytes big = testing::random_bytes(rng, 12u << 20);
  NewTag tag;
  tag.add("w", Tensor::dense(DType::uint8, {static_cast<std::int64_t>(big.size())}, big));
  for (const char* value : {"0", "1"}) {
    INFO("MODELZIP_DIRECT_WRITES=" << value);
    DirectWritesEnv env(value);
    const auto path = dir / (std::string("a") + value + ".zip");
    io::FaultInjector recorder(io::FaultInjector::Plan{.record_calls = true});
    recorder.install();
    {
      Writer w = Writer::open(path, WriterOptions{.durable = true});
      w.add_tag("t", tag);
      w.commit();
      // An append (in place) follows it too.
      Writer more = Writer::open(path, WriterOptions{.durable = true});
      more.add_tag("u", tag);
      more.commit();
    }
    recorder.uninstall();
    int direct_opens = 0;
    for (const auto& c : recorder.records())
      if (c.op == io::SysOp::open && (c.flags & O_DIRECT) != 0) ++direct_opens;
    if (std::string(value) == "0")
      CHECK(direct_opens == 0);
    else
      CHECK(direct_opens >= 2);
    CHECK(Archive::open(path).verify().empty());
  }
}
