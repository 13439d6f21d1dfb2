// The `modelzip._modelzip` extension module and the helpers every binding
// file shares.
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "modelzip/dtype.hpp"

namespace modelzip::python {

void warn_notice(const std::string& archive, const std::string& notice) {
  const std::string text = archive + ": " + notice;
  call_python([] {},  // the interpreter is going: no warning
              [&] {
                if (PyErr_WarnEx(PyExc_UserWarning, text.c_str(), 1) != 0)
                  PyErr_WriteUnraisable(nullptr);
              });
}

std::shared_ptr<const void> python_keeper(py::object object) {
  return std::shared_ptr<const void>(new py::object(std::move(object)), [](const void* p) {
    call_python([] {},  // the interpreter is going: the reference is left
                [p] { delete static_cast<const py::object*>(p); });
  });
}

std::filesystem::path to_path(py::handle path) {
  py::object fs = py::module_::import("os").attr("fspath")(path);
  if (!py::isinstance<py::str>(fs))
    throw py::type_error("paths must be str or os.PathLike of str, not bytes");
  // The file system's bytes: a name that is not UTF-8 comes from os.listdir()
  // and the like as a str with surrogate escapes, which os.fsencode() undoes.
  return std::filesystem::path(py::module_::import("os").attr("fsencode")(fs).cast<std::string>());
}

py::str from_path(const std::string& path) {
  return py::module_::import("os").attr("fsdecode")(py::bytes(path));
}

std::string tag_or_newest(const std::optional<std::string>& tag) {
  return tag.value_or(std::string());
}

void set_public_module(py::handle object) {
  object.attr("__module__") = "modelzip";
}

py::object helper(const char* module, const char* name) {
  return py::module_::import((std::string("modelzip.") + module).c_str()).attr(name);
}

bool initialized(py::handle obj, const std::type_info& type) {
  const py::detail::type_info* info = py::detail::get_type_info(type);
  if (!obj || !info || !PyObject_TypeCheck(obj.ptr(), info->type)) return true;
  auto* instance = reinterpret_cast<py::detail::instance*>(obj.ptr());
  const auto v_h = instance->get_value_and_holder(info, /*throw_if_missing=*/false);
  // Made by __init__ or returned from C++: a value, and a holder that owns it
  // (or none: a reference to an object owned elsewhere, instance->owned is
  // false). pybind11 allocates the value of an instance without holder on
  // first use, uninitialized: that is the case refused.
  return v_h && v_h.value_ptr() != nullptr && (v_h.holder_constructed() || !instance->owned);
}

void require_initialized(py::handle obj, const std::type_info& type) {
  if (initialized(obj, type)) return;
  const py::handle cls = py::type::handle_of(obj);  // modelzip.Writer, or a subclass
  throw py::value_error(py::str(cls.attr("__module__")).cast<std::string>() + "." +
                        py::str(cls.attr("__qualname__")).cast<std::string>() +
                        " object is not initialized (its __init__ raised or was not called)");
}

}  // namespace modelzip::python

PYBIND11_MODULE(_modelzip, m) {
  using namespace modelzip::python;
  m.doc() = "Compiled core of the modelzip package (import `modelzip`, not this module).";
  m.attr("__version__") = MODELZIP_VERSION;
  py::list dtypes;
  for (modelzip::DType t : modelzip::kAllDTypes)
    dtypes.append(py::str(std::string(modelzip::dtype_name(t))));
  m.attr("DTYPES") = py::tuple(dtypes);
  bind_errors(m);
  bind_embeddings(m);  // before Archive, whose signatures name Embeddings
  bind_archive(m);
  bind_writer(m);
  bind_background_save(m);
  bind_convert(m);  // after Writer: returns WriteStats
  bind_distributed(m);
  bind_quantize(m);
  m.def("_released_calls", &released_calls,
        "Calls into the library of non-daemon threads with the GIL released now "
        "(modelzip._exit_wait waits for them at interpreter exit).");
}
