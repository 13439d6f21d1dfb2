// modelzip::Error -> modelzip.Error (or modelzip.NotFoundError for
// ErrorCode::not_found), with the full message as str(e) and the code and
// context as attributes. The exception classes live in modelzip/_errors.py.
#include "modelzip/error.hpp"

#include <exception>

#include "bindings.hpp"

namespace modelzip::python {
namespace {

py::object optional_text(const std::string& s) {
  return s.empty() ? py::none() : py::object(py::str(s));
}

py::object optional_number(const std::optional<std::uint64_t>& n) {
  return n ? py::object(py::int_(*n)) : py::none();
}

void raise_python_error(const Error& e) {
  try {
    const char* name = e.code() == ErrorCode::not_found ? "NotFoundError" : "Error";
    py::object cls = helper("_errors", name);
    const ErrorContext& c = e.context();
    py::object instance = cls(
        py::str(e.what()), py::arg("code") = std::string(to_string(e.code())),
        py::arg("message") = e.message(), py::arg("archive") = optional_text(c.archive),
        py::arg("entry") = optional_text(c.entry), py::arg("tag") = optional_text(c.tag),
        py::arg("line") = optional_number(c.line), py::arg("offset") = optional_number(c.offset));
    PyErr_SetObject(cls.ptr(), instance.ptr());
  } catch (py::error_already_set&) {
    // The helper module could not be imported: still report the failure.
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

}  // namespace

void bind_errors(py::module_&) {
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
