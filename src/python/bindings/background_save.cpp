// modelzip._modelzip.BackgroundSave and start_background_save: the bindings
// of modelzip::BackgroundSave under modelzip.save_async (_async.py, which
// wraps the handle in a concurrent.futures.Future).
//
// The snapshot copy and every wait run with the GIL released; the
// background thread calls into Python only to warn of a notice (a rolled
// back interrupted save: a UserWarning, as Writer.commit gives; skipped while
// the interpreter finalizes, call_python); its progress callback only reads
// the flag stop() sets, so it keeps running while the interpreter is busy or
// shutting down.
//
// CUDA tensors are fetched into staging areas (staging_areas.hpp) that the
// save adopts instead of copying those bytes again.
#include "modelzip/background_save.hpp"

#include <pybind11/stl.h>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "bindings.hpp"
#include "format/tag_name.hpp"
#include "modelzip/error.hpp"
#include "staging_areas.hpp"
#include "tag_contents.hpp"

namespace modelzip::python {

namespace {

// Set by PyBackgroundSave::stop(); read by the save's progress callback.
using StopFlag = std::shared_ptr<std::atomic<bool>>;

// Owns one background save. Destroying it waits for the save, without the GIL.
class PyBackgroundSave {
 public:
  PyBackgroundSave(BackgroundSave save, StopFlag stop)
      : save_(std::move(save)), stop_(std::move(stop)) {}
  PyBackgroundSave(const PyBackgroundSave&) = delete;
  PyBackgroundSave& operator=(const PyBackgroundSave&) = delete;
  ~PyBackgroundSave() {
    ReleasedGil release;
    BackgroundSave ending = std::move(save_);
  }

  Writer::Stats wait() {
    ReleasedGil release;
    try {
      return save_.wait();
    } catch (const Error& e) {
      throw format::with_replace_hint(e, kReplaceHint);
    }
  }
  bool done() const { return save_.done(); }
  bool started() const { return save_.started(); }
  bool cancel() { return save_.cancel(); }
  // Cancels the save if it has not started writing; else makes its commit
  // stop at its next progress report and roll back (wait() then throws
  // Error(cancelled)), unless it is past its commit point. Returns at once.
  void stop() {
    stop_->store(true);
    save_.cancel();
  }
  std::uint64_t snapshot_bytes() const { return save_.snapshot_bytes(); }

 private:
  BackgroundSave save_;
  StopFlag stop_;
};

using MetadataFields = std::map<std::string, std::optional<std::string>>;

// Sets the named fields of the archive metadata at commit (None clears).
std::function<void(Metadata&)> metadata_edit(MetadataFields fields) {
  for (const auto& [name, value] : fields)
    if (name != "model_name" && name != "model_version" && name != "quantization" &&
        name != "description")
      throw py::value_error("unknown metadata field '" + name + "'");
  return [fields = std::move(fields)](Metadata& m) {
    for (const auto& [name, value] : fields) {
      if (name == "model_name") m.model_name = value;
      if (name == "model_version") m.model_version = value;
      if (name == "quantization") m.quantization = value;
      if (name == "description") m.description = value;
    }
  };
}

// `future`: None, or the object whose `_handle` attribute receives the
// handle before this returns, with no Python code run in between (a
// KeyboardInterrupt raised as the call returns cannot lose the save).
py::object start(const py::object& path, const std::string& tag, const py::handle& arrays,
                 const py::object& share, const py::object& compress, const py::object& bfloat16,
                 const py::object& dtypes, const py::object& updater, const py::object& training,
                 const std::optional<MetadataFields>& metadata, bool dedup, bool durable,
                 bool append, bool replace, std::optional<std::size_t> keep_last, bool keep_staging,
                 unsigned copy_threads, const py::object& tag_metadata, const py::object& future) {
  const std::filesystem::path archive = to_path(path);
  // CUDA tensors are fetched into staging areas the save adopts.
  const py::object fetches = helper("_values", "new_fetches")();
  const NewTag contents = tag_contents_from_python(arrays, share, compress, bfloat16, dtypes,
                                                   updater, training, fetches, tag_metadata);
  BackgroundSaveOptions options;
  if (!fetches.is_none()) options.adopt = adopted_areas(fetches.attr("areas"), keep_staging);
  options.writer.dedup = dedup;
  options.writer.durable = durable;
  options.writer.append = append;
  options.writer.on_notice = [archive = archive.string()](const std::string& notice) {
    warn_notice(archive, notice);  // from the save's thread, as Writer.commit's
  };
  options.replace = replace;
  options.keep_last = keep_last;
  if (metadata) options.update_metadata = metadata_edit(*metadata);
  options.keep_staging = keep_staging;
  options.copy_threads = copy_threads;
  // Asked in the background thread at least every 4 MiB and between entries
  // (never calls Python): false once stop() was called.
  auto stop = std::make_shared<std::atomic<bool>>(false);
  options.writer.progress = [stop](const Progress&) { return !stop->load(); };
  std::unique_ptr<PyBackgroundSave> save;
  {
    ReleasedGil release;
    try {
      save = std::make_unique<PyBackgroundSave>(
          BackgroundSave::start(archive, tag, contents, std::move(options)), std::move(stop));
    } catch (const Error& e) {  // also the unretrieved error of an earlier save_async
      throw format::with_replace_hint(e, kReplaceHint);
    }
  }
  // A Ctrl-C during the snapshot copy (GIL released) would be raised as this
  // returns, and the handle dropped, whose destructor would hold the caller
  // until the save had ended: the save is stopped instead (rolled back
  // unless past its commit point) and the KeyboardInterrupt raised here.
  if (PyErr_CheckSignals() != 0) {
    py::error_already_set raised;
    save->stop();
    std::string note = "the save completed before the interrupt could stop it";
    try {
      save->wait();
    } catch (const std::exception& e) {
      note = std::string("the save did not happen: ") + e.what();
    }
    save.reset();
    try {
      if (py::hasattr(raised.value(), "add_note"))
        raised.value().attr("add_note")(py::str(from_path(archive.string())) +
                                        py::str(": " + note));
    } catch (py::error_already_set&) {
    }
    throw raised;
  }
  py::object handle = py::cast(std::move(save));
  if (!future.is_none()) future.attr("_handle") = handle;
  return handle;
}

}  // namespace
}  // namespace modelzip::python

MODELZIP_PY_INITIALIZED_CASTER(modelzip::python::PyBackgroundSave)

namespace modelzip::python {

void bind_background_save(py::module_& m) {
  py::class_<PyBackgroundSave> cls(m, "BackgroundSave",
                                   "One background save (use modelzip.save_async).");
  cls.def("wait", &PyBackgroundSave::wait,
          "Waits (GIL released) and returns the WriteStats or raises the save's error.")
      .def("done", &PyBackgroundSave::done, "True once the save has ended.")
      .def("started", &PyBackgroundSave::started, "True once the save has started writing.")
      .def("cancel", &PyBackgroundSave::cancel,
           "Cancels the save if it has not started writing; True if it is cancelled.")
      .def("stop", &PyBackgroundSave::stop,
           "Cancels the save, or makes its commit roll back unless it is past its commit "
           "point (wait() then raises modelzip.Error 'cancelled'); returns at once.")
      .def("snapshot_bytes", &PyBackgroundSave::snapshot_bytes,
           "Bytes the snapshot copied into the staging area (adopted areas not counted).");
  bind_staging_areas(m);
  m.def("start_background_save", &start, py::arg("path"), py::arg("tag"), py::arg("arrays"),
        py::kw_only(), py::arg("share") = py::none(), py::arg("compress") = false,
        py::arg("bfloat16") = py::tuple(), py::arg("dtypes") = py::none(),
        py::arg("updater") = py::none(), py::arg("training") = py::none(),
        py::arg("metadata") = py::none(), py::arg("dedup") = true, py::arg("durable") = true,
        py::arg("append") = true, py::arg("replace") = false, py::arg("keep_last") = py::none(),
        py::arg("keep_staging") = true, py::arg("copy_threads") = 0u,
        py::arg("tag_metadata") = py::none(), py::arg("future") = py::none(),
        "Snapshots the arrays (GIL released) and starts the save: see modelzip.save_async. "
        "``future``: an object whose _handle receives the handle before the call returns.");
}

}  // namespace modelzip::python
