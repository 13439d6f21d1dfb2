// BackgroundSave: snapshot semantics, every kind of content through the
// snapshot, ordering of two saves of one archive, cancellation, errors from
// wait() and from the next start().
//
// Saves are held back by a progress callback that waits for the test, so
// that "in flight" is a state the test controls, not a race it hopes to
// win (not by holding the archive's lock: valgrind does not let other
// threads run while one waits in fcntl(F_OFD_SETLKW)).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "checkpoint/new_tag_contents.hpp"
#include "io/durable_file.hpp"
#include "model_builder.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/background_save.hpp"
#include "modelzip/error.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

// A point the background thread of a save stops at (from its progress
// callback, inside the commit) until the test opens it.
class Gate {
 public:
  // Options whose progress callback stops at this gate.
  BackgroundSaveOptions stopping_here() {
    BackgroundSaveOptions o;
    o.writer.progress = [this](const Progress&) {
      std::unique_lock lock(mutex_);
      reached_ = true;
      changed_.notify_all();
      changed_.wait(lock, [&] { return open_; });
      return true;
    };
    return o;
  }
  // False if no save reached the gate within a minute.
  bool wait_reached() {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(60), [&] { return reached_; });
  }
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool reached_ = false, open_ = false;
};

std::vector<float> ramp(std::size_t n, float start) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// A tag viewing `values` without copying (the caller keeps them alive).
NewTag borrowed_tag(const std::vector<float>& values) {
  NewTag nt;
  nt.add("w", Tensor::dense(DType::float32, {static_cast<std::int64_t>(values.size())},
                            Bytes::borrow(std::as_bytes(std::span(values)), nullptr)));
  return nt;
}

std::vector<float> load_w(const std::filesystem::path& path, const std::string& tag) {
  Archive a = Archive::open(path);
  auto span = a.tensor("w", tag).as<float>();
  return {span.begin(), span.end()};
}

void write_archive(const std::filesystem::path& path, const std::string& tag) {
  const std::vector<float> values = ramp(16, 0);
  Writer w = Writer::open(path);
  w.add_tag(tag, borrowed_tag(values));
  w.commit();
}

// An archive with tag "base" and a first save (tag "a", holding `values`)
// stopped inside its commit at `gate`: it is writing, and saves of the
// archive started later wait for it.
struct FirstSaveHeld {
  TempDir dir;
  std::filesystem::path path = dir / "m.zip";
  Gate gate;
  BackgroundSave a;

  explicit FirstSaveHeld(const std::vector<float>& values) {
    write_archive(path, "base");
    a = BackgroundSave::start(path, "a", borrowed_tag(values), gate.stopping_here());
    const bool reached = gate.wait_reached();
    if (!reached) gate.open();  // so that destroying `a` does not wait forever
    REQUIRE(reached);
  }
  ~FirstSaveHeld() { gate.open(); }  // before `a` waits for its save
};

}  // namespace

TEST_CASE("BackgroundSave: the archive holds the values of start(), not later changes") {
  FirstSaveHeld held(ramp(1 << 16, 1));
  const auto& path = held.path;
  // `b` waits behind `a`, which is stopped: it has read nothing yet.
  auto b_values =
      std::make_unique<std::vector<float>>(ramp(3 << 20, 7));  // 12 MiB: several copy pieces
  const std::vector<float> expected = *b_values;
  BackgroundSave b = BackgroundSave::start(path, "b", borrowed_tag(*b_values));
  CHECK_FALSE(b.started());
  std::fill(b_values->begin(), b_values->end(), -1.0f);
  b_values.reset();
  held.gate.open();
  held.a.wait();
  const Writer::Stats stats = b.wait();
  CHECK(stats.blobs_written == 1);
  CHECK(b.done());
  CHECK(load_w(path, "b") == expected);
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"base", "a", "b"});
}

TEST_CASE("BackgroundSave: adopted buffers are the snapshot: not copied, kept until the end") {
  TempDir dir;
  const auto path = dir / "m.zip";
  constexpr std::size_t n = 1 << 18;
  std::atomic<bool> freed{false};
  std::shared_ptr<std::vector<float>> owned(new std::vector<float>(ramp(n, 3)),
                                            [&freed](std::vector<float>* v) {
                                              delete v;
                                              freed = true;
                                            });
  const std::vector<float> expected(owned->begin() + n / 2, owned->end());
  const std::vector<float> other = ramp(1000, 9);  // not adopted: copied
  Bytes whole = Bytes::borrow(std::as_bytes(std::span(*owned)), owned);
  owned.reset();
  NewTag nt;
  nt.add("w", Tensor::dense(DType::float32, {static_cast<std::int64_t>(n / 2)},
                            whole.slice(n / 2 * sizeof(float), n / 2 * sizeof(float))));
  nt.add("v", Tensor::dense(DType::float32, {1000},
                            Bytes::borrow(std::as_bytes(std::span(other)), nullptr)));
  Gate gate;
  BackgroundSaveOptions options = gate.stopping_here();
  options.adopt = {std::move(whole)};
  BackgroundSave save = BackgroundSave::start(path, "t", nt, std::move(options));
  nt = NewTag();
  CHECK(save.snapshot_bytes() == 4032);  // "v" only, rounded up to 64 bytes
  const bool reached = gate.wait_reached();
  CHECK_FALSE(freed.load());  // the save holds the adopted buffer while it writes
  gate.open();
  REQUIRE(reached);
  save.wait();
  CHECK(freed.load());  // and lets it go when it ends
  CHECK(load_w(path, "t") == expected);
  Archive a = Archive::open(path);
  auto v = a.tensor("v", "t").as<float>();
  CHECK(std::vector<float>(v.begin(), v.end()) == other);
  CHECK(a.verify().empty());
}

TEST_CASE("BackgroundSave: every kind of content survives the snapshot") {
  TempDir dir;
  const auto path = dir / "m.zip";
  write_archive(path, "base");
  std::mt19937_64 rng(99);
  NewTag nt;
  std::map<std::string, Tensor> expected;
  for (int i = 0; i < 40; ++i) {
    const DType t = kAllDTypes[i % std::size(kAllDTypes)];
    const std::string name = "p" + std::to_string(i);
    expected.emplace(name, random_tensor(rng, t));
    nt.add(name, expected.at(name),
           ParamOptions{i % 4 == 0 ? Compression::deflate : Compression::store});
  }
  Quantization q;
  q.scheme = QuantScheme::affine_per_axis;
  q.axis = 0;
  std::vector<double> scales{0.5, 0.25, 2.0};
  std::vector<std::int64_t> zero_points{0, 3, -2};
  q.scales = Bytes::copy_of(std::as_bytes(std::span(scales)));
  q.zero_points = Bytes::copy_of(std::as_bytes(std::span(zero_points)));
  const Tensor quantized = Tensor::quantized(DType::float32, {3, 4}, q, random_bytes(rng, 12));
  nt.add("quantized", quantized);
  nt.share("shared", "base", "w");
  const Tensor m = random_tensor(rng, DType::float32);
  nt.add_updater_state("p0", "M", m);
  nt.share_updater_state("p1", "V", "base");
  nt.set_entry("notes.txt", bytes_of("free text"));
  {
    // `base` has no updater state p1/V: the save must fail in the background.
    BackgroundSave bad = BackgroundSave::start(path, "bad", nt);
    CHECK_THROWS_AS(bad.wait(), Error);
  }
  NewTag good;
  for (const auto& p : NewTag::Contents::of(nt).params) {
    if (p.source == NewTag::Contents::Param::Source::shared)
      good.share(p.name, p.from_tag, p.from_param);
    else
      good.add(p.name, p.tensor, p.options);
  }
  good.add_updater_state("p0", "M", m);
  good.set_entry("notes.txt", bytes_of("free text"));
  BackgroundSave::start(path, "good", good).wait();

  Archive a = Archive::open(path);
  for (const auto& entry : expected) {  // no structured binding: INFO captures it (clang 14)
    const std::string& name = entry.first;
    INFO(name);
    CHECK(a.tensor(name, "good") == entry.second);
  }
  CHECK(a.tensor("quantized", "good") == quantized);
  CHECK(a.tensor("shared", "good") == a.tensor("w", "base"));
  CHECK(a.updater_state("p0", "M", "good") == m);
  CHECK(a.entry("good/notes.txt").as_string_view() == "free text");
}

TEST_CASE("BackgroundSave: cancel() before the write starts leaves the archive alone") {
  const auto values = ramp(1024, 3);
  FirstSaveHeld held(values);
  const auto& path = held.path;
  BackgroundSave b = BackgroundSave::start(path, "b", borrowed_tag(values));
  CHECK_FALSE(held.a.cancel());  // already writing (stopped inside its commit)
  CHECK(b.cancel());
  CHECK(b.cancel());
  held.gate.open();
  held.a.wait();
  try {
    b.wait();
    FAIL("a cancelled save must not succeed");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::cancelled);
  }
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"base", "a"});
  // A cancelled save is not an unreported error: the next save starts.
  BackgroundSave::start(path, "c", borrowed_tag(values)).wait();
  CHECK(Archive::open(path).tags().back() == "c");
}

TEST_CASE("BackgroundSave: a progress callback saying stop ends the wait for another's lock") {
  TempDir dir;
  const auto path = dir / "m.zip";
  write_archive(path, "base");
  const auto values = ramp(64, 1);
  std::atomic<bool> stop{false};
  std::atomic<int> asked{0};
  BackgroundSaveOptions options;
  options.writer.progress = [&](const Progress&) {
    ++asked;
    return !stop.load();
  };
  BackgroundSave save;  // destroyed after `other` releases the lock, whatever failed
  std::optional<io::FileLock> other(std::in_place, path);  // another writer's lock
  save = BackgroundSave::start(path, "late", borrowed_tag(values), std::move(options));
  auto within = [](std::chrono::seconds limit, const auto& condition) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!condition() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return condition();
  };
  // Asked (0 of 0 bytes) while it waits: before, only when a signal came.
  CHECK(within(std::chrono::seconds(10), [&] { return asked.load() >= 2; }));
  CHECK_FALSE(save.done());
  stop = true;
  REQUIRE(within(std::chrono::seconds(10), [&] { return save.done(); }));  // the lock still held
  try {
    save.wait();
    FAIL("a stopped save must not succeed");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::cancelled);
    CHECK(std::string(e.what()).find("waiting for the archive's lock") != std::string::npos);
  }
  other.reset();
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"base"});
}

TEST_CASE("BackgroundSave: an error nobody waited for is thrown by the next start()") {
  TempDir dir;
  const auto path = dir / "m.zip";
  write_archive(path, "base");
  const auto values = ramp(64, 0);
  { BackgroundSave dup = BackgroundSave::start(path, "BASE", borrowed_tag(values)); }
  try {
    BackgroundSave::start(path, "next", borrowed_tag(values));
    FAIL("the earlier error must be thrown");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::already_exists);
    CHECK(std::string(e.what()).find("an earlier background save failed") != std::string::npos);
  }
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"base"});
  // Reported once: the next start works, and an error wait() reported is
  // not thrown again.
  BackgroundSave again = BackgroundSave::start(path, "base", borrowed_tag(values));
  CHECK_THROWS_AS(again.wait(), Error);
  CHECK_THROWS_AS(again.wait(), Error);  // the same result again
  BackgroundSave::start(path, "next", borrowed_tag(values)).wait();
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"base", "next"});
  CHECK_THROWS_AS(BackgroundSave::start(path, "bad/tag", borrowed_tag(values)), Error);
}

TEST_CASE("BackgroundSave: a third save of one archive waits until the first has ended") {
  const auto values = ramp(256, 5);
  FirstSaveHeld held(values);
  const auto& path = held.path;
  BackgroundSave b = BackgroundSave::start(path, "b", borrowed_tag(values));
  std::atomic<bool> third_started{false};
  BackgroundSave c;
  std::thread starter([&] {
    c = BackgroundSave::start(path, "c", borrowed_tag(values));
    third_started = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK_FALSE(third_started.load());
  CHECK_FALSE(held.a.done());
  held.gate.open();
  starter.join();
  CHECK(third_started.load());
  held.a.wait();
  b.wait();
  c.wait();
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"base", "a", "b", "c"});
  // Another archive is not held up by these.
  BackgroundSave::start(held.dir / "other.zip", "x", borrowed_tag(values)).wait();
  CHECK(load_w(held.dir / "other.zip", "x") == values);
}

TEST_CASE("BackgroundSave: keep_last rotates the archive, two saves in flight at a time") {
  TempDir dir;
  const auto path = dir / "m.zip";
  write_archive(path, "base");
  BackgroundSaveOptions options;
  options.keep_last = 3;
  std::vector<float> values(4096);
  BackgroundSave previous;
  for (int step = 0; step < 7; ++step) {
    std::fill(values.begin(), values.end(), static_cast<float>(step));
    BackgroundSave save =
        BackgroundSave::start(path, "step-" + std::to_string(step), borrowed_tag(values), options);
    std::fill(values.begin(), values.end(), -1.0f);  // after start(): never reaches the archive
    if (previous.valid()) previous.wait();           // `save` was in flight with it
    previous = std::move(save);
  }
  previous.wait();
  Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"step-4", "step-5", "step-6"});
  for (int step = 4; step < 7; ++step)
    CHECK(load_w(path, "step-" + std::to_string(step)) ==
          std::vector<float>(4096, static_cast<float>(step)));
  CHECK(a.verify().empty());
}

TEST_CASE("BackgroundSave: replace swaps the tag in one commit, readers never miss it") {
  TempDir dir;
  const auto path = dir / "m.zip";
  write_archive(path, "base");
  const std::vector<float> old_values = ramp(512, 100);
  {
    Writer w = Writer::open(path);
    w.add_tag("latest", borrowed_tag(old_values));
    w.commit();
  }
  auto new_values = std::make_unique<std::vector<float>>(ramp(512, -50));
  const std::vector<float> expected = *new_values;
  Gate gate;
  BackgroundSaveOptions options = gate.stopping_here();
  options.replace = true;
  BackgroundSave save = BackgroundSave::start(path, "LATEST", borrowed_tag(*new_values), options);
  new_values.reset();
  const bool reached = gate.wait_reached();
  if (reached) {  // stopped inside its commit: readers still see the old tag
    CHECK(Archive::open(path).tags() == std::vector<std::string>{"base", "latest"});
    CHECK(load_w(path, "latest") == old_values);
  }
  gate.open();
  REQUIRE(reached);
  save.wait();
  Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"base", "LATEST"});  // the new spelling, newest
  CHECK(load_w(path, "LATEST") == expected);
  CHECK(a.verify().empty());
  // As Writer::replace_tag: a tag that is missing is added.
  options = {};
  options.replace = true;
  BackgroundSave::start(path, "other", borrowed_tag(old_values), options).wait();
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"base", "LATEST", "other"});
}

TEST_CASE("BackgroundSave: keep_last 0 is refused by start() as Writer::keep_last refuses it") {
  TempDir dir;
  const auto path = dir / "m.zip";
  write_archive(path, "base");
  const std::string before = io_bytes(path);
  std::string writer_message;
  try {
    Writer::open(path).keep_last(0);
  } catch (const Error& e) {
    writer_message = e.what();
  }
  BackgroundSaveOptions options;
  options.keep_last = 0;
  const auto values = ramp(64, 0);
  try {
    BackgroundSave::start(path, "next", borrowed_tag(values), options);
    FAIL("keep_last 0 must be refused");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    CHECK(std::string(e.what()) == writer_message);
  }
  CHECK(io_bytes(path) == before);
  // Nothing was started: no error is left for the next save.
  BackgroundSave::start(path, "next", borrowed_tag(values)).wait();
  CHECK(Archive::open(path).tags() == std::vector<std::string>{"base", "next"});
}
