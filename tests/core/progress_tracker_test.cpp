// detail::ProgressTracker: the ProgressCallback contract in one place:
// done never exceeds total, the end is reported once with done == total
// (also for an operation with nothing to do), a "stop" answer becomes
// Error(cancelled) naming the operation with its context.
#include <doctest/doctest.h>

#include <vector>

#include "core/progress_tracker.hpp"

using namespace modelzip;

namespace {

struct Recorder {
  std::vector<Progress> seen;
  int stop_at = -1;  // answer false to this report (0-based)
  ProgressCallback callback() {
    return [this](const Progress& p) {
      seen.push_back(p);
      return static_cast<int>(seen.size()) - 1 != stop_at;
    };
  }
};

}  // namespace

TEST_CASE("Reports follow the bytes done, and the end is reported once at the total") {
  Recorder r;
  detail::ProgressTracker t(r.callback(), "save");
  CHECK(t.enabled());
  t.set_total(10);
  t.advance(4);
  t.advance(6);
  t.finish();  // the last report already said 10 of 10
  CHECK(r.seen == std::vector<Progress>{{4, 10}, {10, 10}});
}

TEST_CASE("An estimate that falls short grows; one that is too high ends at what was done") {
  Recorder r;
  detail::ProgressTracker t(r.callback(), "save");
  t.set_total(5);
  t.advance(4);
  t.advance(4);  // past the estimate: total follows
  t.finish();
  CHECK(r.seen == std::vector<Progress>{{4, 5}, {8, 8}});
  Recorder high;
  detail::ProgressTracker u(high.callback(), "load");
  u.set_total(100);
  u.advance(30);
  u.finish();
  CHECK(high.seen == std::vector<Progress>{{30, 100}, {30, 30}});
}

TEST_CASE("Nothing to do is still reported, once") {
  Recorder r;
  detail::ProgressTracker t(r.callback(), "verify");
  t.finish();
  t.finish();
  CHECK(r.seen == std::vector<Progress>{{0, 0}});
}

TEST_CASE("A false answer throws Error(cancelled) naming the operation, with the context") {
  Recorder r;
  r.stop_at = 1;
  detail::ProgressTracker t(r.callback(), "load", ErrorContext{.archive = "a.zip", .tag = "v1"});
  t.add_to_total(3);
  t.advance(1);
  try {
    t.advance(1);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::cancelled);
    CHECK(e.message() == "load cancelled");
    CHECK(e.context().archive == "a.zip");
    CHECK(e.context().tag == "v1");
  }
  CHECK(r.seen.size() == 2);
}

TEST_CASE("Without a callback nothing is reported and nothing throws") {
  detail::ProgressTracker t({}, "save");
  CHECK_FALSE(t.enabled());
  t.set_total(1);
  // Calling the empty callback would throw std::bad_function_call.
  CHECK_NOTHROW(t.advance(7));
  CHECK_NOTHROW(t.finish());
}
