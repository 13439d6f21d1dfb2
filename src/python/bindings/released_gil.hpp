// The GIL released for a call into the library, counted so that interpreter
// exit can wait for such calls of threads it would have waited for.
//
// CPython 3.11's Thread.join() marks a thread that is still running as
// ended when a KeyboardInterrupt interrupts the join (its bpo-45274 branch
// releases the thread's own state lock); exit then does not wait for that
// thread. When such a thread's call into modelzip ends during interpreter
// finalization, taking the GIL back makes Python end the thread with
// pthread_exit, whose forced unwinding through the noexcept destructor that
// takes the GIL back is std::terminate: the process aborted ("terminate
// called without an active exception") after a Ctrl-C while threads read a
// remote archive. wait_for_released_calls (an atexit hook of the package)
// waits for the calls of non-daemon threads to return before finalization;
// daemon threads are not waited for, as Python does not wait for them.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>

namespace modelzip::python {

// Use in place of py::gil_scoped_release (also as a py::call_guard): the
// constructor releases the GIL (which the calling thread must hold), the
// destructor takes it back and only then stops counting the call. Not
// copyable or movable.
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

// Calls of non-daemon threads with the GIL released now. Thread-safe.
std::size_t released_calls() noexcept;

}  // namespace modelzip::python
