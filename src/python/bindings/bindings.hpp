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
#include <string_view>
#include <typeinfo>

#include "modelzip/archive.hpp"
#include "modelzip/dist/communicator.hpp"
#include "modelzip/dist/distributed.hpp"
#include "modelzip/finalfusion/embeddings.hpp"
#include "modelzip/graph/training.hpp"
#include "modelzip/metadata.hpp"
#include "modelzip/quantize.hpp"
#include "modelzip/writer.hpp"
#include "released_gil.hpp"

namespace modelzip::python {

namespace py = pybind11;

// The hint on adding a tag that exists, for every save with a replace option
// (Writer.add_tag, modelzip.save, save_async, modelzip.torch.save and
// save_checkpoint): format::with_replace_hint puts it in place of the C++ one.
inline constexpr std::string_view kReplaceHint = "replace=True replaces it";

void bind_errors(py::module_& m);
void bind_archive(py::module_& m);
void bind_writer(py::module_& m);
void bind_background_save(py::module_& m);
void bind_embeddings(py::module_& m);
void bind_convert(py::module_& m);
void bind_distributed(py::module_& m);
void bind_quantize(py::module_& m);

// A shared owner of `object` that may be released from any thread: the last
// release acquires the GIL before dropping the reference (during interpreter
// finalization, on a thread that may not take the GIL, it leaves it).
std::shared_ptr<const void> python_keeper(py::object object);

// A commit's notice (WriterOptions::on_notice: "rolled back an interrupted
// save of tag X") as a Python UserWarning "<archive>: <notice>". Callable
// from any thread, with or without the GIL; never throws (a warning that
// the warnings filter turns into an error is printed as unraisable). Skipped
// during interpreter finalization on a thread that may not take the GIL.
void warn_notice(const std::string& archive, const std::string& notice);

// A str or os.PathLike as a filesystem path (os.fspath semantics; the
// bytes os.fsencode gives, so names that are not UTF-8 work).
std::filesystem::path to_path(py::handle path);
// A path's bytes as the str Python uses for them (os.fsdecode: bytes that are
// not UTF-8 become surrogate escapes, which to_path turns back).
py::str from_path(const std::string& path);

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

// The NewTag Writer.add_tag stages for its arguments (arrays are borrowed:
// the tensors keep them alive through python_keeper()). `fetches`: None, or
// a _device_save.Fetches (background saves, and saves that write while the
// fetch runs): CUDA tensors are fetched into staging areas it collects
// (staging_areas.hpp) instead of into new host tensors. Needs the GIL.
NewTag tag_contents_from_python(const py::handle& arrays, const py::object& share,
                                const py::object& compress, const py::object& bfloat16,
                                const py::object& dtypes, const py::object& updater,
                                const py::object& training, const py::object& fetches = py::none());

// An attribute of the pure-Python helper module modelzip.<module>.
py::object helper(const char* module, const char* name);

// Half-constructed instances. Python can hold an instance of a bound class
// whose C++ object was never made: cls.__new__(cls), or the `self` a
// subclass's __init__ kept before the C++ __init__ raised (a missing file,
// say). pybind11 would hand such an instance to a method as freshly
// allocated, uninitialized memory. Every bound class therefore gets
// InitializedCaster (MODELZIP_PY_INITIALIZED_CASTER below), which raises
// ValueError("<type> object is not initialized (its __init__ raised or was
// not called)") before a method or function receives one, as self or as an
// argument.
//
// initialized(obj, type): false only for an instance of the bound class
// `type` without its C++ object (true for anything else, which the caster
// then accepts or refuses as usual). A __repr__ that must not raise (a
// traceback printer, debugger or pytest calls repr() on such an instance)
// takes a py::handle and checks this first.
bool initialized(py::handle obj, const std::type_info& type);
void require_initialized(py::handle obj, const std::type_info& type);

template <class T>
class InitializedCaster : public py::detail::type_caster_base<T> {
 public:
  bool load(py::handle src, bool convert) {
    require_initialized(src, typeid(T));
    return py::detail::type_caster_base<T>::load(src, convert);
  }
};

}  // namespace modelzip::python

// Declares InitializedCaster as pybind11's caster of the bound class T. At
// global scope, in every translation unit that binds or converts T, before
// any use (for the public types: below, so every file of the bindings sees
// them; for a class local to one file: right after its definition).
#define MODELZIP_PY_INITIALIZED_CASTER(T)                                    \
  namespace pybind11::detail {                                               \
  template <>                                                                \
  class type_caster<T> : public ::modelzip::python::InitializedCaster<T> {}; \
  }

MODELZIP_PY_INITIALIZED_CASTER(modelzip::Metadata)
MODELZIP_PY_INITIALIZED_CASTER(modelzip::ParamInfo)
MODELZIP_PY_INITIALIZED_CASTER(modelzip::Writer::Stats)
MODELZIP_PY_INITIALIZED_CASTER(modelzip::finalfusion::Embeddings)
MODELZIP_PY_INITIALIZED_CASTER(modelzip::QuantizeResult)
MODELZIP_PY_INITIALIZED_CASTER(modelzip::Communicator)
MODELZIP_PY_INITIALIZED_CASTER(modelzip::CollectiveStats)
MODELZIP_PY_INITIALIZED_CASTER(modelzip::CollectiveWriter)
