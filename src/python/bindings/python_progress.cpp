#include "python_progress.hpp"

#include <chrono>
#include <utility>

#include "bindings.hpp"

namespace modelzip::python {

PythonProgress::PythonProgress(const py::object& function) {
  if (function.is_none()) return;
  if (!PyCallable_Check(function.ptr())) throw py::type_error("progress must be callable");
  state_->function = python_keeper(function);
}

ProgressCallback PythonProgress::callback() const {
  return [state = state_,
          last = std::chrono::steady_clock::time_point{}](const Progress& p) mutable -> bool {
    const auto now = std::chrono::steady_clock::now();
    if (!state->function && now - last < std::chrono::milliseconds(20)) return true;
    last = now;
    py::gil_scoped_acquire gil;
    if (state->error) return false;
    try {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (!state->function) return true;
      const auto& fn = *static_cast<const py::object*>(state->function.get());
      py::object result = fn(p.bytes_done, p.bytes_total);
      return result.is_none() || PyObject_IsTrue(result.ptr()) == 1;
    } catch (py::error_already_set& e) {
      state->error = std::move(e);
      return false;
    }
  };
}

py::error_already_set PythonProgress::take_error() const {
  py::error_already_set raised = std::move(*state_->error);
  state_->error.reset();
  return raised;
}

void PythonProgress::raise_kept_or(const Error& e) const {
  if (state_->error) throw take_error();
  throw e;
}

}  // namespace modelzip::python
