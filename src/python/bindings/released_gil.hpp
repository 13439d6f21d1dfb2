// The GIL released for a call into the library, and taken by threads
// without it, safely also while the interpreter finalizes.
//
// CPython 3.11's Thread.join() marks a thread that is still running as
// ended when a KeyboardInterrupt interrupts the join (its bpo-45274 branch
// releases the thread's own state lock); exit then does not wait for that
// thread. Exit never waits for daemon threads. A thread that takes the GIL
// during interpreter finalization is ended by Python with pthread_exit,
// whose forced unwinding through a noexcept C++ frame (the destructor that
// takes the GIL back, a shared_ptr deleter) is std::terminate: the process
// aborted ("terminate called without an active exception") when such a
// thread's call into modelzip ended during finalization.
//
// Two defences: wait_for_released_calls (an atexit hook of the package,
// modelzip/_exit_wait.py) waits for the calls of non-daemon threads to
// return before finalization; and a thread that would take the GIL during
// finalization (a daemon thread's call returning, one exit stopped waiting
// for) is parked for good instead: it sleeps, holding nothing of Python's,
// until the process ends (CPython 3.14 does the same, PyThread_hang_thread);
// a call from C++ into Python (call_python) is answered without Python
// instead. The thread running the finalization takes the GIL as usual.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>

namespace modelzip::python {

// Use in place of py::gil_scoped_release (also as a py::call_guard): the
// constructor releases the GIL (which the calling thread must hold), the
// destructor takes it back and only then stops counting the call; during
// finalization, on a thread other than the finalizing one, it parks the
// thread instead of returning. Not copyable or movable.
class ReleasedGil {
 public:
  ReleasedGil();
  ~ReleasedGil();
  ReleasedGil(const ReleasedGil&) = delete;
  ReleasedGil& operator=(const ReleasedGil&) = delete;

 private:
  bool counted_;          // a non-daemon thread's call
  PyThreadState* state_;  // the thread's state while released
};

namespace gil_detail {

// Takes the GIL on any thread (PyGILState_Ensure: also a thread Python does
// not know, and one that holds the GIL already); during finalization it
// parks a thread that would have to take the GIL, unless it is the
// finalizing one. Code outside this file's implementation uses call_python,
// which decides first what happens when Python cannot be called. Not
// copyable or movable.
class HeldGil {
 public:
  HeldGil();
  ~HeldGil();
  HeldGil(const HeldGil&) = delete;
  HeldGil& operator=(const HeldGil&) = delete;

 private:
  PyGILState_STATE state_;
};

// False during finalization on a thread that does not hold the GIL and is not
// the finalizing one: HeldGil would park it. Thread-safe, GIL not needed.
bool may_take_gil() noexcept;

}  // namespace gil_detail

// Every call from C++ into Python on a thread that may not hold the GIL (a
// progress callback, a Communicator's collective, a notice as a warning, the
// release of a Python object the library kept) goes through here, so that
// each says what it does when Python cannot be called. `call()` runs with the
// GIL held (taken if needed) and its result is returned. During interpreter
// finalization, on a thread that may not take the GIL (gil_detail::may_take_gil), the
// answer is `without_python()` instead, run without the GIL: a value (a
// progress callback's false, which stops the operation), nothing (a warning
// not given, a reference left), or an exception (a collective's
// Error(cancelled)); its result must convert to call()'s.
template <class WithoutPython, class Call>
auto call_python(WithoutPython&& without_python, Call&& call) -> decltype(call()) {
  if (!gil_detail::may_take_gil()) return without_python();
  gil_detail::HeldGil gil;
  return call();
}

// Calls of non-daemon threads with the GIL released now. Thread-safe.
std::size_t released_calls() noexcept;

}  // namespace modelzip::python
