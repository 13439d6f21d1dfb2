#include "released_gil.hpp"

#include <cxxabi.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace py = pybind11;

namespace modelzip::python {
namespace {

std::atomic<std::size_t> in_flight{0};

// Set on the thread that finalizes the interpreter, once it is seen holding
// the GIL during finalization (no other thread can hold it then).
thread_local bool finalizing_thread = false;

// Whether the interpreter is finalizing: an atomic read of the runtime's
// state, safe without the GIL.
bool finalizing() noexcept {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// Sleeps until the process ends, holding nothing of Python's: what a thread
// does instead of taking the GIL during finalization.
[[noreturn]] void park() noexcept {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

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
  if (finalizing()) finalizing_thread = true;
  if (daemon_thread()) return false;
  in_flight.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace

ReleasedGil::ReleasedGil() : counted_(count_call()), state_(PyEval_SaveThread()) {}

// During finalization Python ends a thread other than the finalizing one
// inside PyEval_RestoreThread (pthread_exit, without the GIL); its forced
// unwinding stops here, before this noexcept destructor, and the thread is
// parked. The count drops once the GIL is back: the exit hook, which waits
// with the GIL released, cannot see 0 while this thread still has to take it.
ReleasedGil::~ReleasedGil() {
  try {
    PyEval_RestoreThread(state_);
  } catch (abi::__forced_unwind&) {
    park();
  }
  if (counted_) in_flight.fetch_sub(1, std::memory_order_release);
}

// PyGILState_Ensure on a thread new to Python creates a thread state and
// takes the GIL (ended by Python during finalization, as above); late in
// finalization it would find Python's thread-state machinery torn down, so
// a thread that would have to take the GIL then is parked before it asks.
namespace gil_detail {

HeldGil::HeldGil() {
  if (!may_take_gil()) park();
  try {
    state_ = PyGILState_Ensure();
  } catch (abi::__forced_unwind&) {
    park();
  }
}

HeldGil::~HeldGil() {
  PyGILState_Release(state_);
}

bool may_take_gil() noexcept {
  return !finalizing() || finalizing_thread || PyGILState_Check() != 0;
}

}  // namespace gil_detail

std::size_t released_calls() noexcept {
  return in_flight.load(std::memory_order_acquire);
}

}  // namespace modelzip::python
