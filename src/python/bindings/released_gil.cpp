#include "released_gil.hpp"

#include <atomic>

namespace py = pybind11;

namespace modelzip::python {
namespace {

std::atomic<std::size_t> in_flight{0};

// Whether the calling thread (GIL held) is a daemon thread of `threading`,
// asked once per thread state: a thread's daemon flag cannot change once
// it runs. A thread `threading` does not know counts as not a daemon.
bool daemon_thread() {
  thread_local const PyThreadState* asked = nullptr;
  thread_local bool daemon = false;
  const PyThreadState* state = PyThreadState_Get();
  if (state == asked) return daemon;
  daemon = false;
  try {
    py::object threading = py::module_::import("threading");
    daemon = threading.attr("current_thread")().attr("daemon").cast<bool>();
  } catch (py::error_already_set&) {
  }
  asked = state;
  return daemon;
}

bool count_call() {
  if (daemon_thread()) return false;
  in_flight.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace

ReleasedGil::ReleasedGil() : counted_(count_call()), state_(PyEval_SaveThread()) {}

// The count drops once the GIL is back: the exit hook, which waits with the
// GIL released, cannot see 0 while this thread still has to take it.
ReleasedGil::~ReleasedGil() {
  PyEval_RestoreThread(state_);
  if (counted_) in_flight.fetch_sub(1, std::memory_order_release);
}

std::size_t released_calls() noexcept {
  return in_flight.load(std::memory_order_acquire);
}

}  // namespace modelzip::python
