// The progress callback a long C++ operation run with the GIL released
// (Writer.commit, Archive.verify) asks: with the GIL, it calls the Python
// function given (if any) with (bytes_done, bytes_total) and looks for a
// pending signal (Ctrl-C; at most every 20 ms when there is no function).
// An exception either raises is kept and the callback says stop, and every
// later call says stop without calling Python; the operation then ends
// (usually with Error(cancelled)) and its binding raises the kept exception
// in place of whatever the operation threw, or after it completed anyway.
//
// Thread safety: the callback may run on any thread and takes the GIL; the
// other members are called with the GIL held. Copies of the callback share
// the kept exception with this object (it outlives the operation).
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <optional>
#include <string>

#include "modelzip/error.hpp"
#include "modelzip/progress.hpp"

namespace modelzip::python {

class PythonProgress {
 public:
  // `function`: None, or a callable (else TypeError "progress must be
  // callable"). Returning False (or anything false but None) says stop; so
  // does the callback during interpreter finalization on a thread that may
  // not take the GIL (call_python).
  explicit PythonProgress(const pybind11::object& function);

  ProgressCallback callback() const;

  // Whether the callback kept an exception (and so said stop).
  bool has_error() const { return state_->error.has_value(); }
  // The kept exception, taken out (has_error() is then false). Requires
  // has_error().
  pybind11::error_already_set take_error() const;
  // Forgets a kept exception.
  void clear() const { state_->error.reset(); }
  // Raises the kept exception if there is one, else rethrows `e`.
  [[noreturn]] void raise_kept_or(const Error& e) const;

  // For a save whose commit had callback() (Writer.commit, import_tensor_files,
  // quantize). After it threw `e` with has_error(): raises the kept exception
  // with the note "<archive>: the save did not happen: <e>".
  [[noreturn]] void raise_save_not_done(const std::string& archive, const Error& e) const;
  // After it completed: raises the kept exception, or a signal that arrived
  // after the last report (PyErr_CheckSignals), with the note "<archive>: the
  // save completed before the interrupt could stop it"; else returns.
  void raise_if_interrupted_after_save(const std::string& archive) const;

 private:
  struct State {
    std::shared_ptr<const void> function;  // a py::object, via python_keeper
    std::optional<pybind11::error_already_set> error;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace modelzip::python
