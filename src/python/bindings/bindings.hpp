// Shared declarations of the Python bindings (the `modelzip._modelzip`
// extension). Each bind_* function registers one concept's classes and
// functions on the module; module.cpp calls them in dependency order.
//
// GIL rules followed by every binding:
//  - Python objects are only touched with the GIL held.
//  - Long C++ work (open, load, commit, verify, queries) runs with the GIL
//    released, on C++ values copied out of the Python wrappers first, so a
//    concurrent close() from another thread cannot pull them away.
//  - C++ objects that own Python references and may be destroyed without the
//    GIL (buffers borrowed for a save, callbacks) hold them through
//    python_keeper(), whose deleter acquires the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "modelzip/training.hpp"

namespace modelzip::python {

namespace py = pybind11;

void bind_errors(py::module_& m);
void bind_archive(py::module_& m);
void bind_writer(py::module_& m);
void bind_embeddings(py::module_& m);
void bind_convert(py::module_& m);
void bind_distributed(py::module_& m);
void bind_quantize(py::module_& m);

// A shared owner of `object` that may be released from any thread: the last
// release acquires the GIL before dropping the reference.
std::shared_ptr<const void> python_keeper(py::object object);

// A str or os.PathLike as a filesystem path (os.fspath semantics).
std::filesystem::path to_path(py::handle path);

// None -> "" (the C++ API's "newest tag"), else the str.
std::string tag_or_newest(const std::optional<std::string>& tag);

// Sets __module__ of a bound class or function to "modelzip", the package
// users import, so reprs and help() show modelzip.X.
void set_public_module(py::handle object);

// A training config from / as the dict described in training.cpp. Raises
// TypeError / ValueError for a malformed dict and modelzip.InvalidArgumentError
// for a config that breaks the schema's rules.
training::TrainingConfig training_config_from_python(py::handle object);
py::object training_config_to_python(const training::TrainingConfig& config);

// An attribute of the pure-Python helper module modelzip.<module>.
py::object helper(const char* module, const char* name);

// Whether the C++ object of `self` (an instance of a bound class) was
// constructed. When __init__ raised (a missing file, say) or never ran
// (cls.__new__(cls)), pybind11 hands methods uninitialized memory; a
// traceback printer, debugger or pytest still calls repr() on such an
// instance, so a __repr__ of a class whose constructor can fail checks this.
bool constructed(py::handle self);

}  // namespace modelzip::python
