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
// finalization (a daemon thread's call, one exit stopped waiting for, a
// library thread calling Python) is parked for good instead: it sleeps,
// holding nothing of Python's, until the process ends (CPython 3.14 does the
// same, PyThread_hang_thread). The thread running the finalization takes the
// GIL as usual.
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

// Use in place of py::gil_scoped_acquire, on any thread (PyGILState_Ensure:
// also a thread Python does not know, and one that holds the GIL already);
// during finalization it parks a thread that would have to take the GIL,
// unless it is the finalizing one: callers that can do without Python ask
// may_take_gil() first. Not copyable or movable.
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
// the finalizing one: HeldGil would park it. Then a Python reference is
// leaked rather than dropped, a warning not given, a progress callback
// cancels, a collective fails. Thread-safe, GIL not needed.
bool may_take_gil() noexcept;

// Calls of non-daemon threads with the GIL released now. Thread-safe.
std::size_t released_calls() noexcept;

}  // namespace modelzip::python
