// modelzip._modelzip.Communicator (subclassed in Python by the backends of
// modelzip.distributed: torch.distributed and mpi4py), CollectiveWriter and
// read_blocks, and the handle of a background collective save
// (CollectiveWriter.start_background, under modelzip.distributed.save with
// blocking=False).
//
// The C++ collective commit calls the Python communicator through a
// pybind11 trampoline: commit() runs with the GIL released and each
// collective operation acquires it to call the Python method. rank() and
// size() are asked once and cached. An exception raised by a Python
// collective (e.g. a torch.distributed time-out) propagates out of commit()
// as that Python exception.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <mutex>

#include "arrays.hpp"
#include "bindings.hpp"
#include "checkpoint/tag_metadata.hpp"
#include "core/error_wire.hpp"
#include "format/tag_name.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/dist/background_save.hpp"
#include "modelzip/dist/distributed.hpp"
#include "modelzip/error.hpp"
#include "modelzip/graph/checkpoint.hpp"
#include "staging_areas.hpp"
#include "tag_contents.hpp"

namespace modelzip::python {
namespace {

// Calls `call` with the GIL (call_python). The collectives of a background
// commit still running as the interpreter finalizes (exit left without
// waiting for it) cannot call Python: this rank's commit fails instead with
// Error(cancelled) (the root rolls it back, or the next writer).
template <class Call>
auto collective(Call&& call) -> decltype(call()) {
  return call_python(
      []() -> decltype(call()) {
        throw Error(ErrorCode::cancelled,
                    "the Python interpreter exited during the collective commit");
      },
      std::forward<Call>(call));
}

class PyCommunicator : public Communicator {
 public:
  int rank() const override {
    cache();
    return rank_;
  }
  int size() const override {
    cache();
    return size_;
  }
  std::vector<std::string> gather(std::string_view bytes, int root) override {
    return collective([&] {
      py::object r = call("gather", py::bytes(bytes.data(), bytes.size()), root);
      std::vector<std::string> out;
      if (!r.is_none())
        for (py::handle item : r) out.push_back(item.cast<std::string>());
      return out;
    });
  }
  std::string broadcast(std::string_view bytes, int root) override {
    return collective([&] {
      return call("broadcast", py::bytes(bytes.data(), bytes.size()), root).cast<std::string>();
    });
  }
  // A Ctrl-C noted during a blocking commit of modelzip.distributed
  // (_CommitInterrupt) is passed on as this rank's error, so that every
  // subclass, the caller's own too, tells it at this agreement. Handlers of
  // signals pending since the GIL was released run first (Python's run
  // them only on the main thread).
  std::optional<Failure> agree(std::string_view error) override {
    return collective([&]() -> std::optional<Failure> {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      py::object self = py::cast(static_cast<const Communicator*>(this));
      py::object told = helper("distributed", "_CommitInterrupt")
                            .attr("error_of")(self, py::str(error.data(), error.size()));
      py::object r = call("agree", told);
      if (r.is_none()) return std::nullopt;
      const auto failure = r.cast<std::pair<int, std::string>>();
      return Failure{failure.first, failure.second};
    });
  }

 private:
  template <class... Args>
  py::object call(const char* method, Args&&... args) const {
    py::function f = py::get_override(static_cast<const Communicator*>(this), method);
    if (!f)
      throw py::type_error(std::string("modelzip.Communicator subclasses must implement ") +
                           method + "()");
    return f(std::forward<Args>(args)...);
  }
  void cache() const {
    std::call_once(once_, [&] {
      collective([&] {
        rank_ = call("rank").cast<int>();
        size_ = call("size").cast<int>();
      });
    });
  }
  mutable std::once_flag once_;
  mutable int rank_ = 0, size_ = 1;
};

// (name, updater state name or "" for the parameter `name`, None: the whole
// tensor, or (offset, shape) of a block)
using Request = std::tuple<std::string, std::string,
                           std::optional<std::pair<std::vector<std::int64_t>, Shape>>>;

// Owns one background collective save. Waiting, and destroying it (which
// waits), run without the GIL: the save's communicator may need it.
class PyBackgroundCollectiveSave {
 public:
  explicit PyBackgroundCollectiveSave(BackgroundCollectiveSave save) : save_(std::move(save)) {}
  PyBackgroundCollectiveSave(const PyBackgroundCollectiveSave&) = delete;
  PyBackgroundCollectiveSave& operator=(const PyBackgroundCollectiveSave&) = delete;
  ~PyBackgroundCollectiveSave() {
    ReleasedGil release;
    BackgroundCollectiveSave ending = std::move(save_);
  }
  CollectiveStats wait() {
    ReleasedGil release;
    try {
      return save_.wait();
    } catch (const Error& e) {
      throw format::with_replace_hint(e, kReplaceHint);
    }
  }
  bool done() const { return save_.done(); }

 private:
  BackgroundCollectiveSave save_;
};

// `raw_bits`: None, or the type whose raw bits `value` holds (bfloat16, float8_*: see
// modelzip._values.to_savable). Text (str, lists of str) is taken `whole` only.
Tensor tensor_of(const std::string& name, const py::handle& value, bool whole,
                 const py::object& raw_bits = py::none()) {
  py::tuple savable = helper("_values", "to_savable")(name, value, raw_bits);
  const std::string kind = py::cast<std::string>(savable[0]);
  if (kind == "strings" && !whole)
    throw py::type_error("parameter '" + name +
                         "': text is saved whole (pass the str or list of str, not a Shard)");
  if (kind != "dense" && kind != "strings")
    throw py::type_error("parameter '" + name +
                         "': distributed saves take dense arrays, str or lists of str");
  return tensor_from_savable(savable, name);
}

}  // namespace
}  // namespace modelzip::python

MODELZIP_PY_INITIALIZED_CASTER(modelzip::python::PyBackgroundCollectiveSave)

namespace modelzip::python {

void bind_distributed(py::module_& m) {
  py::class_<Communicator, PyCommunicator>(m, "Communicator", R"doc(
The collective operations a distributed commit needs. Subclass it (as
modelzip.distributed.TorchCommunicator and MPICommunicator do) and implement
rank(), size(), gather(bytes, root) -> list of bytes at root (None
elsewhere), broadcast(bytes, root) -> bytes and agree(error: str) -> None or
(lowest failing rank, its message), as the C++ modelzip::Communicator.
A Ctrl-C noted during a blocking commit of modelzip.distributed reaches
agree() as this rank's error (the subclass needs nothing for it).)doc")
      .def(py::init<>());

  py::class_<CollectiveStats>(m, "CollectiveStats")
      .def_readonly("bytes_written", &CollectiveStats::bytes_written)
      .def_readonly("archive_bytes_written", &CollectiveStats::archive_bytes_written)
      .def_readonly("blobs_written", &CollectiveStats::blobs_written)
      .def_readonly("blobs_deduplicated", &CollectiveStats::blobs_deduplicated)
      .def_readonly("appended", &CollectiveStats::appended)
      .def("__repr__", [](const CollectiveStats& s) {
        return "CollectiveStats(bytes_written=" + std::to_string(s.bytes_written) +
               ", archive_bytes_written=" + std::to_string(s.archive_bytes_written) +
               ", blobs_written=" + std::to_string(s.blobs_written) +
               ", blobs_deduplicated=" + std::to_string(s.blobs_deduplicated) +
               ", appended=" + (s.appended ? "True" : "False") + ")";
      });

  py::class_<CollectiveWriter>(m, "CollectiveWriter")
      .def(py::init([](const py::object& path, Communicator& comm, bool dedup, bool durable,
                       int root, std::optional<double> rank_lock_timeout) {
             CollectiveOptions options;
             options.dedup = dedup;
             options.durable = durable;
             options.root = root;
             if (rank_lock_timeout) {
               if (!(*rank_lock_timeout >= 0) || *rank_lock_timeout > 1e9)
                 throw py::value_error("rank_lock_timeout must be a number of seconds >= 0");
               options.rank_lock_timeout = std::chrono::milliseconds(
                   static_cast<std::int64_t>(*rank_lock_timeout * 1000 + 0.5));
             }
             options.on_notice = [archive = to_path(path).string()](const std::string& n) {
               warn_notice(archive, n);
             };
             return std::make_unique<CollectiveWriter>(to_path(path), comm, options);
           }),
           py::arg("path"), py::arg("comm"), py::arg("dedup") = true, py::arg("durable") = true,
           py::arg("root") = 0, py::arg("rank_lock_timeout") = py::none(), py::keep_alive<1, 3>())
      .def(
          "add",
          [](CollectiveWriter& w, const std::string& name, const py::handle& value,
             const py::object& dtype) { w.add(name, tensor_of(name, value, true, dtype)); },
          py::arg("name"), py::arg("value"), py::kw_only(), py::arg("dtype") = py::none())
      .def(
          "add_shard",
          [](CollectiveWriter& w, const std::string& name, const py::handle& value,
             std::vector<std::int64_t> global_shape, std::vector<std::int64_t> offset,
             const py::object& dtype) {
            Tensor data = tensor_of(name, value, false, dtype);
            Block block{std::move(offset), data.shape()};
            w.add_shard(name, std::move(data), std::move(global_shape), std::move(block));
          },
          py::arg("name"), py::arg("value"), py::arg("global_shape"), py::arg("offset"),
          py::kw_only(), py::arg("dtype") = py::none())
      .def("share", &CollectiveWriter::share, py::arg("name"), py::arg("from_tag"),
           py::arg("from_param"))
      .def(
          "add_updater_state",
          [](CollectiveWriter& w, const std::string& variable, const std::string& state,
             const py::handle& value) {
            w.add_updater_state(variable, state, tensor_of(variable + "/" + state, value, true));
          },
          py::arg("variable"), py::arg("state"), py::arg("value"))
      .def(
          "add_updater_shard",
          [](CollectiveWriter& w, const std::string& variable, const std::string& state,
             const py::handle& value, std::vector<std::int64_t> global_shape,
             std::vector<std::int64_t> offset) {
            Tensor data = tensor_of(variable + "/" + state, value, false);
            Block block{std::move(offset), data.shape()};
            w.add_updater_shard(variable, state, std::move(data), std::move(global_shape),
                                std::move(block));
          },
          py::arg("variable"), py::arg("state"), py::arg("value"), py::arg("global_shape"),
          py::arg("offset"))
      .def(
          "set_entry",
          [](CollectiveWriter& w, const std::string& relative_name, const py::bytes& data) {
            w.set_entry(relative_name, Bytes::copy_of(std::string_view(data)));
          },
          py::arg("relative_name"), py::arg("data"))
      .def(
          "_set_tag_metadata",
          [](CollectiveWriter& w, const py::object& tag_metadata, const py::object& versions) {
            const format::TagMetadata metadata = tag_metadata_from_python(tag_metadata, versions);
            if (!metadata.empty())
              w.set_entry(std::string(format::kTagMetadataFile),
                          Bytes::copy_of(checkpoint::tag_metadata_text(metadata)));
          },
          py::arg("tag_metadata"), py::arg("versions"),
          "Stages <tag>/metadata.toml as modelzip.save does (internal: the root stages what "
          "modelzip.distributed's saves agreed on): tag_metadata None or {str: str}, versions "
          "None or a torch state dict's _metadata as JSON text; nothing when both are empty.")
      .def(
          "set_training_config",
          [](CollectiveWriter& w, const py::handle& training) {
            w.set_entry(std::string(kTrainingConfigEntryName),
                        training::encode_training_config(training_config_from_python(training)));
          },
          py::arg("training"),
          "Stages <tag>/trainingConfig.fb from a dict shaped as Archive.training_config() "
          "returns (absent keys: the schema's defaults).")
      .def(
          "commit",
          [](CollectiveWriter& w, const std::string& tag, bool replace,
             std::optional<std::size_t> keep_last) {
            try {
              return w.commit(tag,
                              CollectiveCommitOptions{.replace = replace, .keep_last = keep_last});
            } catch (const Error& e) {
              throw format::with_replace_hint(e, kReplaceHint);
            }
          },
          py::arg("tag"), py::kw_only(), py::arg("replace") = false,
          py::arg("keep_last") = py::none(), py::call_guard<ReleasedGil>(),
          "Collective commit of `tag`; ``replace``: replace the tag of that name; "
          "``keep_last``: then keep only the newest n tags (one commit).")
      .def(
          "start_background",
          [](CollectiveWriter& w, std::string tag, bool keep_staging, unsigned copy_threads,
             const py::object& adopt, bool replace, std::optional<std::size_t> keep_last,
             const py::object& into) {
            BackgroundCollectiveOptions options;
            options.keep_staging = keep_staging;
            options.copy_threads = copy_threads;
            options.replace = replace;
            options.keep_last = keep_last;
            if (!adopt.is_none()) options.adopt = adopted_areas(adopt, keep_staging);
            std::unique_ptr<PyBackgroundCollectiveSave> save;
            {
              ReleasedGil release;
              save = std::make_unique<PyBackgroundCollectiveSave>(
                  BackgroundCollectiveSave::start(w, std::move(tag), options));
            }
            py::object handle = py::cast(std::move(save));
            if (!into.is_none()) into.attr("_handle") = handle;
            return handle;
          },
          py::arg("tag"), py::kw_only(), py::arg("keep_staging") = true,
          py::arg("copy_threads") = 0u, py::arg("adopt") = py::none(), py::arg("replace") = false,
          py::arg("keep_last") = py::none(), py::arg("into") = py::none(),
          "Snapshots what is staged (GIL released) and commits it as `tag` in a background "
          "thread over this writer's communicator, which nothing else may use meanwhile; "
          "collective. ``adopt``: _StagingArea objects whose bytes the staged arrays may view, "
          "taken over instead of copied (they must not change afterwards). ``into``: an "
          "object whose _handle receives the handle before the call returns (no Python code "
          "runs in between: a KeyboardInterrupt raised as it returns cannot lose the save). "
          "Returns a BackgroundCollectiveSave (see modelzip.distributed.save).");

  py::class_<PyBackgroundCollectiveSave>(m, "BackgroundCollectiveSave",
                                         "One background collective save "
                                         "(use modelzip.distributed.save(blocking=False)).")
      .def("wait", &PyBackgroundCollectiveSave::wait,
           "Waits (GIL released) and returns this rank's CollectiveStats or raises the "
           "commit's error (the same on every rank).")
      .def("done", &PyBackgroundCollectiveSave::done, "True once the save has ended.");

  m.def(
      "read_blocks",
      [](const py::object& path, const std::vector<Request>& requests,
         const std::optional<std::string>& tag) {
        const std::filesystem::path p = to_path(path);
        std::vector<std::pair<Tensor, BlockReadStats>> results;
        {
          ReleasedGil release;
          Archive archive = Archive::open(p);
          const std::string t = tag_or_newest(tag);
          for (const auto& [name, state, block] : requests) {
            BlockReadStats stats;
            if (block && state.empty()) {
              Block b{block->first, block->second};
              results.emplace_back(read_block(archive, name, b, t, &stats), stats);
            } else if (block) {
              Block b{block->first, block->second};
              results.emplace_back(read_updater_block(archive, name, state, b, t, &stats), stats);
            } else {
              ParamInfo info;
              if (state.empty())
                info = archive.param(name, t);
              else
                for (const ParamInfo& s : archive.updater_states(t))
                  if (s.name == name && s.state == state) info = s;
              stats.bytes_read = info.nbytes;
              stats.zero_copy = !info.compressed;
              results.emplace_back(
                  state.empty() ? archive.tensor(name, t) : archive.updater_state(name, state, t),
                  stats);
            }
          }
        }
        py::list out;
        for (const auto& [t, s] : results)
          out.append(py::make_tuple(tensor_to_python(t, false), s.bytes_read, s.zero_copy));
        return out;
      },
      py::arg("path"), py::arg("requests"), py::arg("tag") = py::none());

  m.def(
      "_cancelled_error_text",
      [](const std::string& message) {
        return detail::encode_error(Error(ErrorCode::cancelled, message));
      },
      py::arg("message"),
      "Error(cancelled, message) as a rank tells it to the others in a collective commit's "
      "agreement (internal: modelzip.distributed's Ctrl-C).");
}

}  // namespace modelzip::python
