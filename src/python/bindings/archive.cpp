// modelzip.Archive (read access), modelzip.ParamInfo and modelzip.Metadata.
#include "modelzip/archive.hpp"

#include <pybind11/operators.h>
#include <pybind11/stl.h>

#include <fcntl.h>

#include <cstdio>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "checkpoint/data_ranges.hpp"
#include "checkpoint/tag_metadata.hpp"
#include "core/crc32.hpp"
#include "modelzip/entry_stream.hpp"
#include "modelzip/finalfusion/embeddings.hpp"
#include "modelzip/graph/checkpoint.hpp"
#include "python_progress.hpp"

namespace modelzip::python {
namespace {

// The Python-side archive: a modelzip::Archive until close(). Methods copy
// the Archive (a shared pointer) out under the GIL before releasing it, so a
// concurrent close() only drops this wrapper's reference.
class PyArchive {
 public:
  explicit PyArchive(Archive archive) : archive_(std::move(archive)), name_(archive_->name()) {}

  const Archive& get() const {
    if (!archive_) throw py::value_error("I/O operation on closed archive '" + name_ + "'");
    return *archive_;
  }
  void close() { archive_.reset(); }
  bool closed() const { return !archive_; }
  const std::string& name() const { return name_; }

 private:
  std::optional<Archive> archive_;
  std::string name_;
};

// An EntryStream for Python (modelzip/_entry_reader.py wraps it in an
// io.RawIOBase): reads are serialized, as EntryStream allows one thread at a
// time and they run with the GIL released.
class PyEntryStream {
 public:
  explicit PyEntryStream(EntryStream stream) : stream_(std::move(stream)) {}

  // Fills the start of `target` (any writable C-contiguous buffer: a
  // bytearray, memoryview, numpy array); returns the bytes read, 0 at the end.
  std::size_t readinto(const py::object& target) {
    Py_buffer view;
    if (PyObject_GetBuffer(target.ptr(), &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0)
      throw py::error_already_set();
    struct Release {
      Py_buffer* view;
      ~Release() { PyBuffer_Release(view); }
    } release_view{&view};
    auto* data = static_cast<std::byte*>(view.buf);
    const auto bytes = static_cast<std::size_t>(view.len);
    ReleasedGil release;
    const std::lock_guard lock(mutex_);
    return stream_.read(std::span<std::byte>(data, bytes));
  }
  std::uint64_t size() const noexcept { return stream_.size(); }
  std::uint64_t position() {
    const std::lock_guard lock(mutex_);
    return stream_.position();
  }

 private:
  EntryStream stream_;
  std::mutex mutex_;
};

}  // namespace
}  // namespace modelzip::python

MODELZIP_PY_INITIALIZED_CASTER(modelzip::python::PyArchive)
MODELZIP_PY_INITIALIZED_CASTER(modelzip::python::PyEntryStream)

namespace modelzip::python {
namespace {

ReadMode read_mode(bool copy, bool writable = false) {
  if (copy) return ReadMode::copy;
  return writable ? ReadMode::private_view : ReadMode::zero_copy;
}

py::tuple shape_tuple(const Shape& shape) {
  py::tuple t(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) t[i] = py::int_(shape[i]);
  return t;
}

std::string repr_optional(const std::optional<std::string>& s) {
  return s ? py::repr(py::str(*s)).cast<std::string>() : "None";
}

// A tensor read for Python, and whether its memory is its own (a copy, a
// private view or a dequantized result: the array may be writable).
struct Loaded {
  Tensor tensor;
  bool owned = false;
};

// Refuses an embedding parameter with the Python way to read it (the
// library's own message names the C++ call).
void require_tensor(const Archive& archive, const std::string& name, const std::string& tag) {
  if (archive.param(name, tag).kind != BlobKind::embedding) return;
  throw Error(ErrorCode::invalid_argument,
              "parameter '" + name + "' is an embedding, not a tensor: read it with " +
                  "Archive.embeddings(" + py::repr(py::str(name)).cast<std::string>() + ")",
              ErrorContext{.archive = archive.name(), .tag = tag});
}

// `t` read in `mode`; with dequantize, a quantized one becomes the dense
// tensor of its original type it stands for.
Loaded loaded(Tensor t, ReadMode mode, bool dequantize) {
  if (dequantize && t.layout() == Layout::quantized) return {t.dequantize(), true};
  return {std::move(t), mode != ReadMode::zero_copy};
}

// The tensors of `names` (every tensor parameter when none), parameters of
// `tag`, read with the GIL released; by name, in the order of `names` (else
// stored order).
py::dict load_tensors(const Archive& archive, const std::string& tag, ReadMode mode,
                      bool dequantize, const std::optional<std::vector<std::string>>& names = {},
                      bool verify = false) {
  if (names)
    for (const std::string& name : *names) require_tensor(archive, name, tag);
  std::vector<std::pair<std::string, Loaded>> tensors;
  {
    ReleasedGil release;
    std::vector<std::string> wanted;
    if (names) {
      wanted = *names;
    } else {
      for (const ParamInfo& p : archive.params(tag))
        if (p.kind == BlobKind::tensor) wanted.push_back(p.name);
    }
    NamedTensors read = archive.load(tag, {.names = wanted, .mode = mode, .verify_crc = verify});
    for (const std::string& name : wanted)
      tensors.emplace_back(name, loaded(read.at(name), mode, dequantize));
  }
  py::dict out;
  for (const auto& [name, l] : tensors) out[py::str(name)] = tensor_to_python(l.tensor, l.owned);
  return out;
}

std::string quoted(const std::string& s) {
  return py::repr(py::str(s)).cast<std::string>();
}

std::string byte_size(std::uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  std::size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

// <modelzip.Archive 'm.zip': 3 tags ['a', 'b', 'c'], newest 'c': 4 parameters
// (1.5 MiB), 8 updater states>; at most 6 tags are listed (first 3, last 3).
// "<modelzip.Archive (not opened)>" when the constructor failed or never ran.
std::string archive_repr(py::handle handle) {
  if (!initialized(handle, typeid(PyArchive))) return "<modelzip.Archive (not opened)>";
  const PyArchive& self = handle.cast<const PyArchive&>();
  std::string r = "<modelzip.Archive " + py::repr(from_path(self.name())).cast<std::string>();
  if (self.closed()) return r + " (closed)>";
  const Archive& a = self.get();
  const auto& tags = a.tags();
  if (tags.empty()) return r + ": no tags>";
  r += ": " + std::to_string(tags.size()) + (tags.size() == 1 ? " tag [" : " tags [");
  for (std::size_t i = 0; i < tags.size(); ++i) {
    if (tags.size() > 6 && i >= 3 && i < tags.size() - 3) {
      if (i == 3) r += ", ...";
      continue;
    }
    r += (i ? ", " : "") + quoted(tags[i]);
  }
  const std::vector<ParamInfo> params = a.params(tags.back());
  std::uint64_t bytes = 0;
  for (const ParamInfo& p : params) bytes += p.nbytes;
  r += "], newest " + quoted(tags.back()) + ": " + std::to_string(params.size()) +
       (params.size() == 1 ? " parameter (" : " parameters (") + byte_size(bytes) + ")";
  const std::size_t states = a.updater_states(tags.back()).size();
  if (states)
    r += ", " + std::to_string(states) + (states == 1 ? " updater state" : " updater states");
  return r + ">";
}

bool has_param(const Archive& a, const std::string& name, const std::string& tag) {
  for (const ParamInfo& p : a.params(tag))
    if (p.name == name) return true;
  return false;
}

bool archive_contains(const PyArchive& self, const py::object& key) {
  const Archive& a = self.get();
  if (py::isinstance<py::str>(key)) {
    const std::string k = key.cast<std::string>();
    if (a.find_tag(k)) return true;
    return !a.tags().empty() && has_param(a, k, a.tags().back());
  }
  if (py::isinstance<py::tuple>(key) && py::len(key) == 2 &&
      py::isinstance<py::str>(key[py::int_(0)]) && py::isinstance<py::str>(key[py::int_(1)])) {
    const std::optional<std::string> tag = a.find_tag(key[py::int_(0)].cast<std::string>());
    return tag && has_param(a, key[py::int_(1)].cast<std::string>(), *tag);
  }
  return false;
}

void bind_metadata(py::module_& m) {
  py::class_<Metadata> cls(m, "Metadata", R"(Archive-level metadata (the entry modelzip.toml).

Every field except format_version and writer is optional (None when absent).
Change it with Writer.update_metadata(), modelzip.save(..., metadata=...) or
modelzip.update_metadata().)");
  cls.def(py::init(
              [](std::optional<std::string> model_name, std::optional<std::string> model_version,
                 std::optional<std::string> quantization, std::optional<std::string> description) {
                Metadata meta;
                meta.model_name = std::move(model_name);
                meta.model_version = std::move(model_version);
                meta.quantization = std::move(quantization);
                meta.description = std::move(description);
                return meta;
              }),
          py::kw_only(), py::arg("model_name") = py::none(), py::arg("model_version") = py::none(),
          py::arg("quantization") = py::none(), py::arg("description") = py::none(),
          "Metadata with the given optional fields.")
      .def_readonly("format_version", &Metadata::format_version,
                    "The archive format version (set by the writer).")
      .def_readwrite("model_name", &Metadata::model_name, "Name of the model, or None.")
      .def_readwrite("model_version", &Metadata::model_version, "Version of the model, or None.")
      .def_readwrite("quantization", &Metadata::quantization,
                     "Quantization scheme, e.g. \"none\" or \"int8-per-channel\", or None.")
      .def_readwrite("description", &Metadata::description, "Free text, or None.")
      .def_readonly("writer", &Metadata::writer,
                    "The software that wrote the archive last (set at commit).")
      .def(py::self == py::self)
      .def("__repr__", [](const Metadata& meta) {
        return "modelzip.Metadata(model_name=" + repr_optional(meta.model_name) +
               ", model_version=" + repr_optional(meta.model_version) +
               ", quantization=" + repr_optional(meta.quantization) +
               ", description=" + repr_optional(meta.description) +
               ", format_version=" + std::to_string(meta.format_version) +
               ", writer=" + py::repr(py::str(meta.writer)).cast<std::string>() + ")";
      });
  cls.attr("__hash__") = py::none();
  set_public_module(cls);
}

void bind_param_info(py::module_& m) {
  py::class_<ParamInfo> cls(
      m, "ParamInfo", R"(What an archive says about one parameter (no tensor data is read).)");
  cls.def_readonly("name", &ParamInfo::name, "Parameter name (for updater state: the variable).")
      .def_readonly("state", &ParamInfo::state,
                    "Updater state name (\"M\", \"V\"...); \"\" for parameters.")
      .def_property_readonly(
          "kind",
          [](const ParamInfo& p) { return p.kind == BlobKind::tensor ? "tensor" : "embedding"; },
          "\"tensor\", or \"embedding\" for a finalfusion embedding parameter.")
      .def_property_readonly(
          "dtype", [](const ParamInfo& p) { return std::string(dtype_name(p.dtype)); },
          "numpy-style dtype name: \"float32\", \"bfloat16\", \"float8_e4m3fn\", \"complex64\", "
          "\"string\"...")
      .def_property_readonly(
          "shape", [](const ParamInfo& p) { return shape_tuple(p.shape); },
          "The dense shape; (rows, dims) for an embedding (() when its file's chunk headers "
          "cannot be read).")
      .def_property_readonly(
          "layout", [](const ParamInfo& p) { return std::string(layout_name(p.layout)); },
          "\"dense\" or \"sparse_coo\".")
      .def_readonly("nbytes", &ParamInfo::nbytes, "Uncompressed bytes of tensor data.")
      .def_readonly("blob", &ParamInfo::blob, "Entry path of the blob in the zip.")
      .def_readonly("owner_tag", &ParamInfo::owner_tag, "The tag whose folder holds the blob.")
      .def_readonly("shared", &ParamInfo::shared, "True when the blob belongs to another tag.")
      .def_readonly("compressed", &ParamInfo::compressed, "True when the blob is deflated.")
      .def("__repr__", [](const ParamInfo& p) {
        std::string r = "modelzip.ParamInfo(name=" + py::repr(py::str(p.name)).cast<std::string>();
        if (!p.state.empty()) r += ", state=" + py::repr(py::str(p.state)).cast<std::string>();
        r += ", dtype='" + std::string(dtype_name(p.dtype)) +
             "', shape=" + py::repr(shape_tuple(p.shape)).cast<std::string>();
        if (p.layout != Layout::dense) r += ", layout='" + std::string(layout_name(p.layout)) + "'";
        if (p.kind != BlobKind::tensor) r += ", kind='embedding'";
        r += ", nbytes=" + std::to_string(p.nbytes) +
             ", blob=" + py::repr(py::str(p.blob)).cast<std::string>() +
             ", shared=" + (p.shared ? "True" : "False") +
             ", compressed=" + (p.compressed ? "True" : "False") + ")";
        return r;
      });
  set_public_module(cls);
}

}  // namespace

void bind_archive(py::module_& m) {
  bind_metadata(m);
  bind_param_info(m);
  m.def(
      "_crc32_concat",
      [](std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t length_b) {
        return detail::crc32_concat(crc_a, crc_b, length_b);
      },
      py::arg("crc_a"), py::arg("crc_b"), py::arg("length_b"),
      "Internal: the CRC-32 of A followed by B from crc(A), crc(B) and B's length.");
  m.def(
      "problems_found",
      [](const std::vector<std::pair<std::string, std::string>>& problems) {
        std::vector<Problem> list;
        list.reserve(problems.size());
        for (const auto& [entry, message] : problems) list.push_back(Problem{entry, message});
        return problems_found(list);
      },
      py::arg("problems"),
      "How many problems Archive.verify() found, given the (entry, message) list it returned: "
      "one for each problem listed and N for each \"... and N more problems in this entry\" "
      "(verify lists at most 20 per entry), as C++ modelzip::problems_found.");

  py::class_<PyArchive> cls(m, "Archive", R"(A modelzip archive opened for reading.

The file is memory-mapped; tensors of stored (uncompressed) blobs load as
read-only numpy views into the mapping (zero-copy). Every array keeps the
mapping alive, so arrays stay valid after close(). Use copy=True for
writable arrays in owned memory (their CRC-32 is checked).

Thread safety: all methods may be called from several threads; long reads
release the GIL.)");
  cls.def(py::init([](const py::object& path) {
            std::filesystem::path p = to_path(path);
            ReleasedGil release;
            return PyArchive(Archive::open(p));
          }),
          py::arg("path"),
          "Opens (maps and validates) the archive at `path`, a file or an http://, https:// or "
          "s3:// URL (read by ranges into a local cache).")
      .def_property_readonly(
          "name", [](const PyArchive& self) { return from_path(self.name()); },
          "The path given at open.")
      .def_property_readonly("closed", &PyArchive::closed, "True after close().")
      .def(
          "changed_since_open",
          [](const PyArchive& self) {
            Archive a = self.get();
            ReleasedGil release;
            return a.changed_since_open();
          },
          R"(Whether the archive is no longer what this Archive describes.

True when another writer has committed to the file since the open (a save,
save_async, keep_last, remove_tag), a rewrite replaced it, it was removed,
or its committed state differs otherwise; for an http(s):// or s3:// URL,
when the object was replaced or removed on the server. Then reopen() gives
the archive as it is now. This Archive keeps describing it as it was (tags,
load()...). A local file costs a few system calls (its append journal and
the file's identity, FORMAT.md section 8.3) and, when those moved, a read
of its tail (tags.txt and the central directory), so an append still in
flight, one rolled back or a touch is not a change; a URL costs one HEAD
request (size and ETag, or Last-Modified). Raises FileError when the file
cannot be looked at or the server cannot be asked.)")
      .def(
          "reopen",
          [](const PyArchive& self) {
            Archive a = self.get();
            ReleasedGil release;
            return PyArchive(a.reopen());
          },
          R"(A new Archive of the same path or URL: the archive as it is now.

This Archive stays open as it is (close it when done). Raises as
Archive(path) does, FileNotFoundError for a file removed since.)")
      .def("close", &PyArchive::close,
           "Releases the archive. Arrays already loaded stay valid (they keep the mapping).")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](PyArchive& self, const py::object&, const py::object&, const py::object&) {
             self.close();
             return false;
           })
      .def("__repr__", &archive_repr)
      .def("__contains__", &archive_contains, py::arg("key"),
           R"(`"step-1" in archive`: a tag (ignoring case) or a parameter of the newest tag;
`("step-1", "fc.weight") in archive`: parameter `fc.weight` of tag `step-1`.)")
      .def_property_readonly(
          "tags", [](const PyArchive& self) { return self.get().tags(); }, "Tags, oldest first.")
      .def_property_readonly(
          "newest_tag", [](const PyArchive& self) { return self.get().newest_tag(); },
          "The newest tag; raises NotFoundError when the archive has no tags.")
      .def(
          "find_tag",
          [](const PyArchive& self, std::string_view tag) { return self.get().find_tag(tag); },
          py::arg("tag"), "The stored spelling of `tag` (compared ignoring ASCII case), or None.")
      .def_property_readonly(
          "metadata", [](const PyArchive& self) { return self.get().metadata(); },
          "The archive metadata (a copy).")
      .def(
          "params",
          [](const PyArchive& self, const std::optional<std::string>& tag) {
            Archive a = self.get();
            ReleasedGil release;
            return a.params(tag_or_newest(tag));
          },
          py::arg("tag") = py::none(),
          "The parameters of `tag` (None: the newest), in stored order.")
      .def(
          "param",
          [](const PyArchive& self, const std::string& name,
             const std::optional<std::string>& tag) {
            return self.get().param(name, tag_or_newest(tag));
          },
          py::arg("name"), py::arg("tag") = py::none(),
          "One parameter's description; raises NotFoundError if absent.")
      .def(
          "tensor",
          [](const PyArchive& self, const std::string& name, const std::optional<std::string>& tag,
             bool copy, bool dequantize, bool writable) {
            Archive a = self.get();
            const ReadMode mode = read_mode(copy, writable);
            require_tensor(a, name, tag_or_newest(tag));
            Loaded l;
            {
              ReleasedGil release;
              l = loaded(a.tensor(name, tag_or_newest(tag), mode), mode, dequantize);
            }
            return tensor_to_python(l.tensor, l.owned);
          },
          py::arg("name"), py::arg("tag") = py::none(), py::kw_only(), py::arg("copy") = false,
          py::arg("dequantize") = false, py::arg("writable") = false,
          "One parameter of `tag` (None: the newest) as numpy (see load()).")
      .def(
          "load",
          [](const PyArchive& self, const std::optional<std::string>& tag, bool copy,
             bool dequantize, const std::optional<std::vector<std::string>>& names, bool writable,
             bool verify) {
            return helper("_values", "LoadedArrays")(load_tensors(self.get(), tag_or_newest(tag),
                                                                  read_mode(copy, writable),
                                                                  dequantize, names, verify));
          },
          py::arg("tag") = py::none(), py::kw_only(), py::arg("copy") = false,
          py::arg("dequantize") = false, py::arg("names") = py::none(), py::arg("writable") = false,
          py::arg("verify") = false,
          R"(Every tensor parameter of `tag` (None: the newest), by name, in stored order.

Dense tensors are numpy arrays: read-only zero-copy views for stored blobs
unless copy=True or writable=True. bfloat16 loads as uint16 (the raw bits),
float8_e4m3fn and float8_e5m2 as uint8 (the raw bits), strings as an object array of str, sparse tensors as SparseCOO, quantized
tensors as QuantizedTensor (zero-copy views of the integers, scales and zero
points) or, with dequantize=True, as new writable arrays of their original
type. Embedding parameters are skipped (use embeddings()). The result is a
dict (modelzip.LoadedArrays); torch's load_state_dict() refuses it with a
TypeError that names modelzip.torch.load(), which gives torch tensors.

names: only these parameters, in this order (NotFoundError for a missing one).
writable: writable arrays without a copy: views of a private copy-on-write
  mapping of the file made for this call. Writes stay in this process: they
  never reach the file, another load, or another parameter (also not one
  that deduplication stored in the same blob). Deflated blobs (and those of
  remote archives) are copied.
verify: check every blob's CRC-32 before returning (copy=True always does);
  zero-copy loads do not check it otherwise.)")
      .def(
          "load_torch",
          [](const py::object& self, const std::optional<std::string>& tag, bool dequantize) {
            return helper("_torch", "load_state_dict")(self, tag, dequantize);
          },
          py::arg("tag") = py::none(), py::kw_only(), py::arg("dequantize") = false,
          R"(Every tensor parameter of `tag` as torch tensors, without copies.

The same as modelzip.torch.load(path, tag) on this archive: writable CPU
tensors viewing a private copy-on-write mapping of the file (writes stay in
this process), which keep it alive after close(). bfloat16 comes back as
torch.bfloat16, float8_e4m3fn and float8_e5m2 as torch.float8_* (torch >=
2.1; TypeError naming the parameter before), sparse tensors as torch sparse
COO. Quantized tensors come
back as torch quantized tensors (affine per tensor or per axis, int8 ->
qint8, uint8 -> quint8, of float32 values), exactly as saved, or with
dequantize=True as float tensors of their original type (the only way for
block-wise and int4 ones, which torch cannot hold). A tag saved from a
quantize_dynamic model's state_dict() loads back into it (torch dtypes and
packed-parameter tuples are restored from their markers). Weights tied in
the saved state dict (recorded in the tag's ties.json) come back as one
tensor; every other parameter is its own tensor, also when deduplication
stored it in the same blob as another. Text comes back as the str or lists of
str saved, Python int, float, bool and None values, numpy scalars, lists and
tuples of them (_python_types) as themselves. Raises TypeError for parameters torch cannot hold (uint16/32/64).)")
      .def(
          "training_config",
          [](const PyArchive& self, const std::optional<std::string>& tag) -> py::object {
            Archive a = self.get();
            std::optional<training::TrainingConfig> config;
            {
              ReleasedGil release;
              config = load_training_config(a, tag_or_newest(tag));
            }
            return config ? training_config_to_python(*config) : py::none();
          },
          py::arg("tag") = py::none(),
          R"(The training config of `tag` (None: the newest) as a dict, or None if it has none.

The dict has the shape `modelzip info --json` prints: "updater" ({"type":
"Adam", "learning_rate": ...}), "learning_rate_schedule", "regularization",
"minimize", the four data-set mappings, "loss_variables", "iteration_count",
"epoch_count" and "properties" (str -> str).)")
      .def(
          "updater_states",
          [](const PyArchive& self, const std::optional<std::string>& tag) {
            Archive a = self.get();
            ReleasedGil release;
            return a.updater_states(tag_or_newest(tag));
          },
          py::arg("tag") = py::none(),
          "Optimizer state arrays of `tag` (name = variable, state = state name).")
      .def(
          "updater_state",
          [](const PyArchive& self, const std::string& variable, const std::string& state,
             const std::optional<std::string>& tag, bool copy, bool writable) {
            Archive a = self.get();
            Tensor t;
            {
              ReleasedGil release;
              t = a.updater_state(variable, state, tag_or_newest(tag), read_mode(copy, writable));
            }
            return tensor_to_python(t, copy || writable);
          },
          py::arg("variable"), py::arg("state"), py::arg("tag") = py::none(), py::kw_only(),
          py::arg("copy") = false, py::arg("writable") = false,
          "One optimizer state array, as numpy (see load(): copy and writable as there).")
      .def(
          "embeddings",
          [](const PyArchive& self, const std::string& name,
             const std::optional<std::string>& tag) {
            Archive a = self.get();
            ReleasedGil release;
            return finalfusion::Embeddings::read(a.embedding_file(name, tag_or_newest(tag)), name);
          },
          py::arg("name"), py::arg("tag") = py::none(),
          "An embedding parameter as Embeddings (its matrix is a zero-copy view when stored).")
      .def(
          "verify",
          [](const PyArchive& self, const py::object& progress) {
            Archive a = self.get();
            const PythonProgress watch(progress);
            std::vector<Problem> problems;
            try {
              ReleasedGil release;
              problems = a.verify(watch.callback());
            } catch (const Error& e) {
              watch.raise_kept_or(e);
            }
            py::list out;
            for (const Problem& p : problems) out.append(py::make_tuple(p.entry, p.message));
            return out;
          },
          py::kw_only(), py::arg("progress") = py::none(),
          "Checks everything (zip structure, every CRC-32, blob, reference, and the "
          "consistency of graph checkpoints: schemas/GRAPH.md section 4). "
          "Returns (entry, message) problems; empty when the archive is valid. At most 20 per "
          "entry, then one \"... and N more problems in this entry\": "
          "modelzip.problems_found(problems) counts them all. "
          "progress: called as progress(bytes_done, bytes_total) after each entry checked; "
          "returning False cancels (Error with code \"cancelled\"); an exception it raises, "
          "and Ctrl-C's KeyboardInterrupt, stop the check and are raised.")
      .def(
          "_data_ranges",
          [](const PyArchive& self, const std::vector<std::string>& entries) {
            Archive a = self.get();
            std::vector<std::optional<DataRange>> ranges;
            {
              ReleasedGil release;
              const Archive::Impl& impl = Archive::Impl::of(a);
              for (const std::string& entry : entries) {
                try {
                  ranges.push_back(tensor_data_range(impl, impl.entry_or_throw(entry)));
                } catch (const Error& err) {
                  throw err.with_context(impl.context(entry));
                }
              }
            }
            py::list out;
            for (const auto& r : ranges) {
              if (!r) {
                out.append(py::none());
                continue;
              }
              out.append(py::make_tuple(r->offset, r->nbytes, r->entry_crc, r->crc_before,
                                        r->crc_after, r->after_bytes));
            }
            return out;
          },
          py::arg("entries"),
          "Internal (the read() staging source of modelzip.torch): for each blob entry, "
          "(file offset, bytes, entry CRC-32, CRC-32 of the bytes before and after the data, "
          "bytes after) of a stored dense tensor a read() of the file can serve, else None "
          "(checkpoint/data_ranges.hpp).")
      .def(
          "_share", [](const PyArchive& self) { return PyArchive(self.get()); },
          "Internal: a new Archive of the same opened state (the same snapshot of the file), "
          "which stays open when this one is closed.")
      .def(
          "_raise_mismatch",
          [](const PyArchive& self, const std::string& entry, const std::string& tag,
             const std::string& message) {
            const Archive a = self.get();
            const Archive::Impl& impl = Archive::Impl::of(a);
            ReleasedGil release;
            throw impl.read_error(Error(ErrorCode::corrupt, message), impl.context(entry, tag));
          },
          py::arg("entry"), py::arg("tag"), py::arg("message"),
          "Internal (the CRC-32 checks of modelzip.torch's device loads): raises what a read of "
          "`entry` of `tag` whose bytes do not match (`message`) raises: modelzip.Error "
          "(corrupt), or FileError when another writer's commit since the open may have "
          "overwritten the entry (Archive::Impl::read_error).")
      .def(
          "_data_fd",
          [](const PyArchive& self) -> std::optional<int> {
            const Archive a = self.get();
            const auto& fd = Archive::Impl::of(a).snapshot_file.fd;
            if (!fd) return std::nullopt;
            const int copy = ::fcntl(fd->get(), F_DUPFD_CLOEXEC, 0);
            if (copy < 0) {
              PyErr_SetFromErrno(PyExc_OSError);
              throw py::error_already_set();
            }
            return copy;
          },
          "Internal: a new descriptor (the caller closes it) of the file the ranges of "
          "_data_ranges lie in; None for remote and in-memory archives.")
      .def(
          "entry_names", [](const PyArchive& self) { return self.get().entry_names(); },
          "Every zip entry name, in central directory order.")
      .def(
          "has_entry",
          [](const PyArchive& self, std::string_view name) { return self.get().has_entry(name); },
          py::arg("name"), "Whether the archive has an entry of this exact name.")
      .def(
          "entry",
          [](const PyArchive& self, const std::string& name) {
            Archive a = self.get();
            Bytes data;
            {
              ReleasedGil release;
              data = a.entry(name, ReadMode::copy);
            }
            return py::bytes(reinterpret_cast<const char*>(data.data()), data.size());
          },
          py::arg("name"),
          "The contents of entry `name` as bytes (CRC-checked); NotFoundError if absent.")
      .def(
          "open_entry",
          [](const PyArchive& self, const std::string& name) {
            Archive a = self.get();
            std::optional<EntryStream> stream;
            {
              ReleasedGil release;
              stream.emplace(EntryStream::open(a, name));
            }
            return helper("_entry_reader", "EntryReader")(
                std::make_unique<PyEntryStream>(std::move(*stream)), name);
          },
          py::arg("name"),
          R"(Zip entry `name` as a binary file object read front to back (io.RawIOBase:
read, readinto, readall, readline...; not seekable), for entries too large
to hold in memory: memory is bounded by the reads' sizes, whatever the
entry's size or compression. The read that reaches the end checks the
entry's size and CRC-32 (modelzip.Error "corrupt" naming the entry when they
differ). A context manager; it stays usable after the Archive is closed.
NotFoundError (a KeyError) when the archive has no such entry.)")
      .def(
          "tag_metadata",
          [](const PyArchive& self, const std::optional<std::string>& tag) {
            Archive a = self.get();
            ReleasedGil release;
            return checkpoint::read_tag_metadata(a, tag_or_newest(tag)).safetensors;
          },
          py::arg("tag") = py::none(),
          R"(The free-form metadata of `tag` (None: the newest) as a dict of str, {} when it
has none: the pairs given as save(..., tag_metadata=) (safetensors'
save_file(metadata=); safe_open(...).metadata() reads them there), or kept from
the "__metadata__" of imported safetensors files (FORMAT.md section 3.1).)")
      .def(
          "_torch_metadata",
          [](const PyArchive& self, const std::string& tag) {
            Archive a = self.get();
            ReleasedGil release;
            return checkpoint::read_tag_metadata(a, tag).torch;
          },
          py::arg("tag"),
          "Internal (the torch loads): the table `torch` of the tag's metadata.toml "
          "(state_dict_metadata: the JSON of the saved state dict's _metadata).");
  set_public_module(cls);
  py::class_<PyEntryStream>(m, "_EntryStream",
                            "Internal: the EntryStream behind Archive.open_entry().")
      .def("readinto", &PyEntryStream::readinto, py::arg("buffer"))
      .def_property_readonly("size", &PyEntryStream::size)
      .def_property_readonly("position", &PyEntryStream::position);
}

}  // namespace modelzip::python
