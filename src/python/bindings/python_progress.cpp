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
    return call_python([] { return false; },  // the interpreter is going: the operation stops
                       [&]() -> bool {
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
                       });
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

namespace {

// Adds "<archive>: <note>" to the exception (BaseException.add_note: shown
// under its traceback); a failure to add it is ignored.
void add_note(py::error_already_set& raised, const std::string& archive, const std::string& note) {
  py::object value = raised.value();
  if (!py::hasattr(value, "add_note")) return;
  try {
    value.attr("add_note")(py::str(from_path(archive)) + py::str(": " + note));
  } catch (py::error_already_set&) {
  }
}

constexpr const char* kCompletedNote = "the save completed before the interrupt could stop it";

}  // namespace

void PythonProgress::raise_save_not_done(const std::string& archive, const Error& e) const {
  py::error_already_set raised = take_error();
  add_note(raised, archive, "the save did not happen: " + std::string(e.what()));
  throw raised;
}

void PythonProgress::raise_if_interrupted_after_save(const std::string& archive) const {
  if (state_->error) {
    py::error_already_set raised = take_error();
    add_note(raised, archive, kCompletedNote);
    throw raised;
  }
  if (PyErr_CheckSignals() != 0) {
    py::error_already_set raised;
    add_note(raised, archive, kCompletedNote);
    throw raised;
  }
}

}  // namespace modelzip::python
