// modelzip.Writer (add and remove tags, set metadata, commit) and
// modelzip.WriteStats.
//
// Arrays given to add_tag are borrowed, not copied: each staged Tensor views
// the numpy buffer and holds the array through python_keeper() until the C++
// Writer drops the staged tag (after a successful commit, or when the Writer
// is closed). commit() runs with the GIL released.
#include "modelzip/writer.hpp"

#include <pybind11/stl.h>

#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "format/tag_name.hpp"
#include "modelzip/error.hpp"
#include "python_progress.hpp"
#include "staging_areas.hpp"
#include "tag_contents.hpp"

namespace modelzip::python {
namespace {

// The metadata fields a user sets (format_version and writer are the
// library's), by their Python name.
constexpr std::string_view kMetadataFields[] = {"model_name", "model_version", "quantization",
                                                "description"};
struct MetadataField {
  std::optional<std::string> Metadata::*member;
  std::optional<std::string>& get(Metadata& m) const { return m.*member; }
};
std::optional<MetadataField> metadata_field(std::string_view name) {
  if (name == "model_name") return MetadataField{&Metadata::model_name};
  if (name == "model_version") return MetadataField{&Metadata::model_version};
  if (name == "quantization") return MetadataField{&Metadata::quantization};
  if (name == "description") return MetadataField{&Metadata::description};
  return std::nullopt;
}

class PyWriter {
 public:
  PyWriter(const py::object& path, bool dedup, bool durable, bool append,
           const py::object& progress)
      : path_(to_path(path).string()), progress_(progress) {
    WriterOptions options;
    options.dedup = dedup;
    options.durable = durable;
    options.append = append;
    options.on_notice = [archive = path_](const std::string& notice) {
      warn_notice(archive, notice);
    };
    // Ctrl-C: Python's SIGINT handler only notes the signal while commit()
    // runs without the GIL; the progress hook looks for it (with the GIL, at
    // most every 20 ms unless there is a Python callback) and cancels, so
    // the commit rolls back and commit() raises the KeyboardInterrupt.
    // Once an exception is kept, every later call says stop without
    // calling Python.
    options.progress = progress_.callback();
    std::filesystem::path p = path_;
    ReleasedGil release;
    writer_.emplace(Writer::open(p, std::move(options)));
  }

  // `overlap_fetch` (modelzip.save and the torch saves, which commit right
  // after): CUDA tensors are fetched in the background into staging areas
  // that commit() writes from as their bytes arrive (staging_areas.hpp).
  void add_tag(const std::string& tag, const py::handle& arrays, const py::object& share,
               const py::object& compress, const py::object& bfloat16, const py::object& dtypes,
               const py::object& updater, const py::object& training, bool replace,
               bool overlap_fetch, const py::object& tag_metadata) {
    Writer& w = get();
    py::object fetches = py::none();
    if (overlap_fetch) fetches = helper("_values", "new_fetches")(true);
    try {
      NewTag contents = tag_contents_from_python(arrays, share, compress, bfloat16, dtypes, updater,
                                                 training, fetches, tag_metadata);
      if (replace)
        w.replace_tag(tag, std::move(contents));
      else
        w.add_tag(tag, std::move(contents));
    } catch (const Error& e) {
      if (!fetches.is_none()) fetches.attr("stop")();  // waits for them, errors aside
      throw format::with_replace_hint(e, kReplaceHint);
    } catch (...) {
      if (!fetches.is_none()) fetches.attr("stop")();  // waits for them, errors aside
      throw;
    }
    if (!fetches.is_none()) fetches_.push_back(std::move(fetches));
    dirty_ = true;
  }

  void remove_tag(const std::string& tag) {
    get().remove_tag(tag);
    dirty_ = true;
  }

  void keep_last(std::size_t n) {
    get().keep_last(n);
    dirty_ = true;
  }

  // Deprecated spelling of update_metadata(metadata) (a whole value): kept
  // for one release, with a DeprecationWarning.
  void set_metadata(const Metadata& metadata) {
    if (PyErr_WarnEx(PyExc_DeprecationWarning,
                     "Writer.set_metadata(metadata) is deprecated: use "
                     "Writer.update_metadata(metadata), which replaces every field the same way",
                     1) != 0)
      throw py::error_already_set();
    get().update_metadata([metadata](Metadata& m) { m = metadata; });
    dirty_ = true;
  }

  // Stages a change of some metadata fields (a mapping), or of every field
  // (a Metadata), applied at commit under the write lock to the metadata the
  // archive has then (Writer::update_metadata), so that a change another
  // process commits in between is kept.
  void update_metadata(const py::object& update, bool clear) {
    if (py::isinstance<Metadata>(update)) {
      get().update_metadata([whole = update.cast<Metadata>()](Metadata& m) { m = whole; });
      dirty_ = true;
      return;
    }
    std::map<std::string, std::optional<std::string>> fields;
    try {
      fields = update.cast<decltype(fields)>();
    } catch (const py::cast_error&) {
      throw py::type_error(
          "Writer.update_metadata: fields must be a mapping of str to str or "
          "None, or a modelzip.Metadata, not " +
          std::string(py::str(update.get_type().attr("__name__"))));
    }
    for (const auto& [name, value] : fields)  // here: the edit must not throw at commit
      if (!metadata_field(name)) throw py::value_error("unknown metadata field '" + name + "'");
    get().update_metadata([fields, clear](Metadata& m) {
      if (clear)
        for (std::string_view name : kMetadataFields) metadata_field(name)->get(m).reset();
      for (const auto& [name, value] : fields) metadata_field(name)->get(m) = value;
    });
    dirty_ = true;
  }

  void collect_garbage() {
    get().collect_garbage();
    dirty_ = true;
  }

  std::vector<std::string> tags() { return get().tags(); }

  Writer::Stats commit() {
    Writer& w = get();
    struct Busy {
      bool& flag;
      explicit Busy(bool& f) : flag(f) { flag = true; }
      ~Busy() { flag = false; }
    } busy(busy_);
    try {
      std::vector<std::shared_ptr<const detail::FillGate>> gates;
      for (const py::object& f : fetches_)
        for (auto& gate : fill_gates(f.attr("areas"))) gates.push_back(std::move(gate));
      ReleasedGil release;
      const detail::FillGate::Scope arriving(std::move(gates));
      w.commit();
    } catch (const Error& e) {
      // The exception of the progress hook (a Ctrl-C) comes first: it is
      // why the commit stopped, or it came while the commit failed.
      if (progress_.has_error()) {
        stop_fetches();
        progress_.raise_save_not_done(path_, e);
      }
      // A fetch that failed failed the commit: its own error is raised.
      finish_fetches();
      throw format::with_replace_hint(e, kReplaceHint);  // another writer added the tag
    }
    finish_fetches();
    fetches_.clear();
    dirty_ = false;
    last_stats_ = w.last_stats();
    // The commit completed although the hook said stop, or a Ctrl-C came
    // after the last point that could cancel it (the rename, the journal's
    // removal, CompleteMultipartUpload): the save is complete and the
    // interrupt is raised now, not lost.
    progress_.raise_if_interrupted_after_save(path_);
    return last_stats_;
  }

  Writer::Stats last_stats() const { return last_stats_; }
  bool dirty() const { return dirty_; }
  bool busy() const { return busy_; }
  bool closed() const { return !writer_; }
  const std::string& path() const { return path_; }

  // Drops the staged changes (Writer::discard) and releases the borrowed
  // arrays; the Writer stays open.
  void discard() {
    Writer& w = get();
    for (const py::object& f : std::exchange(fetches_, {})) f.attr("stop")();
    w.discard();
    progress_.clear();
    dirty_ = false;
  }

  // Discards staged changes (releasing the borrowed arrays).
  void close() {
    if (busy_)
      throw py::value_error(
          "the Writer is busy committing (from a progress callback or another thread)");
    for (const py::object& f : std::exchange(fetches_, {})) f.attr("stop")();
    writer_.reset();
    dirty_ = false;
  }

 private:
  // Waits for the fetches of the staged tags; raises the first one's error.
  // They stay listed until a commit succeeds: the bytes of a failed fetch
  // never become filled, so a commit retried later fails again.
  void finish_fetches() {
    for (const py::object& f : fetches_) f.attr("wait")();
  }

  // Stops the fetches of the staged tags, their errors aside (the kept
  // exception of the progress hook is raised instead).
  void stop_fetches() {
    for (const py::object& f : fetches_) f.attr("stop")();
  }

  Writer& get() {
    if (!writer_) throw py::value_error("operation on closed Writer for '" + path_ + "'");
    if (busy_)
      throw py::value_error(
          "the Writer is busy committing (from a progress callback or another thread)");
    return *writer_;
  }

  std::optional<Writer> writer_;
  std::string path_;
  PythonProgress progress_;  // the commit's callback and the exception it kept
  Writer::Stats last_stats_;
  bool busy_ = false;  // commit() is running with the GIL released
  bool dirty_ = false;
  std::vector<py::object> fetches_;  // _device_save.Fetches still filling staged tags
};

}  // namespace
}  // namespace modelzip::python

MODELZIP_PY_INITIALIZED_CASTER(modelzip::python::PyWriter)

namespace modelzip::python {
namespace {

std::string stats_repr(const Writer::Stats& s) {
  return "modelzip.WriteStats(bytes_written=" + std::to_string(s.bytes_written) +
         ", blobs_written=" + std::to_string(s.blobs_written) +
         ", blobs_deduplicated=" + std::to_string(s.blobs_deduplicated) +
         ", blobs_collected=" + std::to_string(s.blobs_collected) +
         ", bytes_collected=" + std::to_string(s.bytes_collected) +
         ", appended=" + (s.appended ? "True" : "False") +
         ", bytes_freed=" + std::to_string(s.bytes_freed) + ")";
}

}  // namespace

void bind_writer(py::module_& m) {
  py::class_<Writer::Stats> stats(m, "WriteStats", "Statistics of one commit.");
  stats.def_readonly("bytes_written", &Writer::Stats::bytes_written, "Size of the archive written.")
      .def_readonly("blobs_written", &Writer::Stats::blobs_written, "New blob entries written.")
      .def_readonly("blobs_deduplicated", &Writer::Stats::blobs_deduplicated,
                    "Parameters written as references to equal blobs (dedup).")
      .def_readonly("blobs_collected", &Writer::Stats::blobs_collected,
                    "Unreferenced blobs dropped by collect_garbage().")
      .def_readonly("bytes_collected", &Writer::Stats::bytes_collected,
                    "Uncompressed bytes of the blobs dropped.")
      .def_readonly("appended", &Writer::Stats::appended,
                    "True when the commit changed the archive in place instead of rewriting it.")
      .def_readonly("bytes_freed", &Writer::Stats::bytes_freed,
                    "Bytes of removed entries left in the file as free entries by an in-place "
                    "commit (collect_garbage() drops them).")
      .def("__repr__", &stats_repr);
  set_public_module(stats);

  py::class_<PyWriter> cls(m, "Writer",
                           R"(Adds tags to an archive, removes tags, sets metadata; commit() writes.

Nothing touches the file until commit(), which writes a complete new archive
beside it and renames it over the old one (fsynced when durable=True): the
path holds the old archive or the new one, never a mix. A missing file
starts an empty archive.

Arrays given to add_tag() are not copied: the Writer keeps them alive and
reads them during commit(), so do not modify them before commit() returns.
As a context manager, leaving the with-block without an exception commits
the staged changes (if any); with an exception they are discarded.

A Writer is not thread-safe: use one per thread (other processes' commits to
the same archive are serialized by a lock of the archive itself; no lock
file is created).)");
  cls.def(py::init<const py::object&, bool, bool, bool, const py::object&>(), py::arg("path"),
          py::kw_only(), py::arg("dedup") = true, py::arg("durable") = true,
          py::arg("append") = true, py::arg("progress") = py::none(),
          R"(Opens `path` for modification.

dedup: write arrays equal to a blob already in the archive as references.
durable: fsync the file and folder before commit() returns.
append: let commits that only add and remove tags change the archive in place
(crash-safe, cost proportional to what changes; removed tags' bytes stay as
free entries until collect_garbage()) instead of rewriting it.
progress: called as progress(bytes_done, bytes_total) during commit();
returning False cancels (commit() raises Error with code "cancelled"); an
exception it raises is re-raised by commit().)")
      .def("add_tag", &PyWriter::add_tag, py::arg("tag"), py::arg("arrays"), py::kw_only(),
           py::arg("share") = py::none(), py::arg("compress") = false,
           py::arg("bfloat16") = py::tuple(), py::arg("dtypes") = py::none(),
           py::arg("updater") = py::none(), py::arg("training") = py::none(),
           py::arg("replace") = false, py::arg("_overlap_fetch") = false,
           py::arg("tag_metadata") = py::none(),
           R"(Stages a new tag (it becomes the newest) holding `arrays`.

arrays: mapping name -> numpy array, torch tensor, anything with __array__ or
  .numpy(), str / list of str (strings), SparseCOO, Embeddings, or a Python int,
  float, bool or None (stored 0-d, its type recorded in the tag's
  "_python_types" parameter; ValueError for an int beyond 64 bits), a numpy
  scalar, or a list or tuple of such values (one array; numbers of several
  kinds are stored as np.array stores them, unrecorded; ValueError for str
  beside other kinds, None or ragged: docs/torch.md, "Python values"). Arrays are
  borrowed until commit() returns (C-contiguous little-endian copies are made
  only for arrays that are not).
share: {name: (tag, param)}: `name` is parameter `param` of existing tag `tag`.
compress: True, or the names to deflate (default: stored, zero-copy reads).
dtypes: {name: "bfloat16" | "float8_e4m3fn" | "float8_e5m2" | "float8_e8m0fnu" |
  "float4_e2m1fn_x2"}: arrays holding the raw bits of a type numpy lacks
  (uint16/int16 for bfloat16, uint8/int8 for the others; float4_e2m1fn_x2: one
  byte per pair of FP4 values, first in the low nibble). torch tensors and ml_dtypes arrays of these types are
  recognised without it.
bfloat16: names of uint16/int16 arrays holding bfloat16 bits (the older
  shorthand of dtypes={name: "bfloat16"}).
updater: {(variable, state): array}: optimizer state arrays (e.g. Adam "M").
  compress, dtypes and bfloat16 name updater states as (variable, state) tuples.
training: the tag's training config (<tag>/trainingConfig.fb) as a dict in
  the shape Archive.training_config() returns; absent keys take the schema's
  defaults.
replace: replace the tag of that name (any letter case) if there is one at
  commit, in the same commit; without it an existing tag is an error. The
  contents cannot share from the tag they replace.
tag_metadata: {str: str}: the tag's free-form metadata, as safetensors'
  save_file(metadata=) takes it (Archive.tag_metadata() gives it back; an
  export to .safetensors writes it as "__metadata__"). A torch state dict's
  module versions (state_dict()._metadata) are kept beside it, for the torch
  loads.)")
      .def("remove_tag", &PyWriter::remove_tag, py::arg("tag"),
           "Stages removal of `tag` (ignoring case). Blobs other tags share are kept.")
      .def("keep_last", &PyWriter::keep_last, py::arg("n"),
           "Stages keeping only the newest `n` tags (n >= 1): at commit, after the changes "
           "staged before, the oldest tags beyond n are removed as remove_tag() removes them.")
      .def("set_metadata", &PyWriter::set_metadata, py::arg("metadata"),
           "Deprecated (DeprecationWarning): use update_metadata(metadata), which "
           "replaces every field the same way.")
      .def("update_metadata", &PyWriter::update_metadata, py::arg("fields"), py::kw_only(),
           py::arg("clear") = false,
           R"(Stages a change of the metadata fields named in the mapping `fields`
(None clears one; with clear=True every field is cleared first), or, given a
Metadata, of every field (a whole replacement). It is applied at commit,
under the archive's write lock, to the metadata the archive has then: a
change another process committed in between is kept.)")
      .def("collect_garbage", &PyWriter::collect_garbage,
           "Stages dropping blob entries that no tag references any more.")
      .def("discard", &PyWriter::discard,
           "Drops every staged change (also those a failed commit() kept staged) and "
           "releases the borrowed arrays; the archive is not touched and the Writer stays "
           "open for new changes.")
      .def_property_readonly("tags", &PyWriter::tags, "Tags as they will be after commit().")
      .def("commit", &PyWriter::commit,
           "Writes everything staged (GIL released) and returns the WriteStats. "
           "On failure the old archive is untouched and the changes stay staged.")
      .def_property_readonly("last_stats", &PyWriter::last_stats,
                             "WriteStats of the last commit() (also after close()).")
      .def_property_readonly(
          "path", [](const PyWriter& self) { return from_path(self.path()); }, "The archive path.")
      .def_property_readonly("closed", &PyWriter::closed, "True after close().")
      .def("close", &PyWriter::close,
           "Discards the staged changes and releases the borrowed arrays.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](PyWriter& self, const py::object& type, const py::object&, const py::object&) {
             // The block is over whatever the commit does: a failed commit
             // raises with the Writer closed (its changes dropped, the
             // arrays released), as a file closes at the end of its block.
             if (type.is_none() && !self.closed() && self.dirty()) {
               try {
                 self.commit();
               } catch (...) {
                 if (!self.busy()) self.close();
                 throw;
               }
             }
             self.close();
             return false;
           })
      .def("__repr__", [](py::handle handle) {
        if (!initialized(handle, typeid(PyWriter)))
          return std::string("<modelzip.Writer (not opened)>");
        const PyWriter& self = handle.cast<const PyWriter&>();
        return "<modelzip.Writer " + py::repr(from_path(self.path())).cast<std::string>() +
               (self.closed() ? " (closed)>" : ">");
      });
  set_public_module(cls);
}

}  // namespace modelzip::python
