// modelzip::Error -> modelzip.Error or the subclass modelzip._errors.error_class
// picks for its code and errno (NotFoundError, InvalidArgumentError,
// FileError...), with the full message as str(e) and the code and context as
// attributes. The exception classes live in modelzip/_errors.py.
#include "modelzip/error.hpp"

#include <exception>

#include "bindings.hpp"
#include "sigint_watch.hpp"

namespace modelzip::python {
namespace {

// Messages quote names and bytes from untrusted files, which need not be
// UTF-8: such bytes show as \xNN escapes instead of failing the conversion.
py::str text(const std::string& s) {
  PyObject* decoded =
      PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "backslashreplace");
  if (!decoded) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(decoded);
}

py::object optional_text(const std::string& s) {
  return s.empty() ? py::none() : py::object(text(s));
}

py::object optional_number(const std::optional<std::uint64_t>& n) {
  return n ? py::object(py::int_(*n)) : py::none();
}

// Adds "modelzip: <e.what()>" to the exception set now (BaseException.add_note);
// any failure to add it is ignored.
void note_error(const Error& e) {
  py::error_already_set raised;
  try {
    py::object value = raised.value();
    if (py::hasattr(value, "add_note"))
      value.attr("add_note")(py::str("modelzip: ") + text(e.what()));
  } catch (py::error_already_set&) {
  }
  raised.restore();
}

void raise_python_error(const Error& e) {
  // An exception of a Python signal handler (Ctrl-C's KeyboardInterrupt)
  // that came while the operation ran, without the GIL, is raised instead
  // of `e`: the interrupt may be why it stopped, and is not lost either way.
  if (PyErr_CheckSignals() != 0) return note_error(e);
  try {
    const std::string code(error_code_name(e.code()));
    py::object cls = helper("_errors", "error_class")(code, e.system_error());
    const ErrorContext& c = e.context();
    py::dict kwargs;
    kwargs["code"] = code;
    kwargs["message"] = text(e.message());
    kwargs["archive"] = optional_text(c.archive);
    kwargs["entry"] = optional_text(c.entry);
    kwargs["tag"] = optional_text(c.tag);
    kwargs["line"] = optional_number(c.line);
    kwargs["offset"] = optional_number(c.offset);
    if (e.code() == ErrorCode::io) kwargs["errno"] = e.system_error();
    py::object instance = cls(text(e.what()), **kwargs);
    PyErr_SetObject(cls.ptr(), instance.ptr());
  } catch (py::error_already_set& raised) {
    // Not an Exception (KeyboardInterrupt, SystemExit): raised as it is.
    if (!raised.matches(PyExc_Exception)) {
      raised.restore();
      return note_error(e);
    }
    // The helper module could not be imported: still report the failure.
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

}  // namespace

void bind_errors(py::module_&) {
  // Ctrl-C stops remote reads of every thread: the read throws
  // Error(cancelled); on the main thread (where Python's SIGINT handler
  // runs) raise_python_error() raises the KeyboardInterrupt the handler
  // noted instead, elsewhere it is raised as modelzip.Error.
  stop_fetches_on_sigint();
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      raise_python_error(e);
    }
  });
}

}  // namespace modelzip::python
