// Tensor file converters: .npy, .npz, .safetensors and TFRT BTF files to and
// from numpy arrays, and straight between such files and archive tags.
#include "modelzip/convert.hpp"

#include <pybind11/stl.h>
#include <map>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "convert/kept_metadata.hpp"
#include "format/tag_name.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/writer.hpp"
#include "python_progress.hpp"

namespace modelzip::python {
namespace {

convert::StringMap string_map(const py::object& mapping) {
  convert::StringMap out;
  if (mapping.is_none()) return out;
  for (py::handle item : mapping.attr("items")()) {
    py::tuple pair = py::reinterpret_borrow<py::tuple>(item);
    out[pair[0].cast<std::string>()] = pair[1].cast<std::string>();
  }
  return out;
}

// import_tensor_files without the GIL: `progress` is the commit's.
Writer::Stats import_files(const std::filesystem::path& a, const std::string& tag,
                           const std::vector<std::filesystem::path>& files, bool compress,
                           bool dedup, bool durable, bool append, ProgressCallback progress) {
  const ParamOptions options{compress ? Compression::deflate : Compression::store};
  NewTag contents;  // views into the mapped files, alive until the commit returns
  convert::StringMap safetensors_metadata;
  std::map<std::string, std::filesystem::path> source_of;  // as modelzip import names a clash
  for (const auto& f : files) {
    convert::TensorFile file = convert::read_tensor_file(f);
    convert::detail::merge_file_metadata(safetensors_metadata, file, f);
    for (auto& t : file.tensors) {
      if (auto [it, fresh] = source_of.emplace(t.name, f); !fresh)
        throw Error(ErrorCode::invalid_argument, "parameter '" + t.name + "' is in both " +
                                                     it->second.string() + " and " + f.string());
      try {
        contents.add(t.name, t.tensor, options);
      } catch (const Error& e) {
        throw e.with_context({.archive = f.string()});
      }
    }
  }
  convert::detail::keep_metadata(contents, safetensors_metadata);
  WriterOptions writer_options;
  writer_options.dedup = dedup;
  writer_options.durable = durable;
  writer_options.append = append;
  writer_options.progress = std::move(progress);
  writer_options.on_notice = [archive = a.string()](const std::string& notice) {
    warn_notice(archive, notice);
  };
  Writer writer = Writer::open(a, writer_options);
  try {
    writer.add_tag(tag, std::move(contents));
    writer.commit();
  } catch (const Error& e) {
    throw format::with_replace_hint(e, "");  // no way to replace a tag here
  }
  return writer.last_stats();
}

}  // namespace

void bind_convert(py::module_& m) {
  m.def(
      "read_tensor_file",
      [](const py::object& path) {
        std::filesystem::path p = to_path(path);
        convert::TensorFile file;
        {
          ReleasedGil release;
          file = convert::read_tensor_file(p);
        }
        py::dict tensors;
        for (const auto& t : file.tensors)
          tensors[py::str(t.name)] = tensor_to_python(t.tensor, /*writable=*/false);
        return py::make_tuple(tensors, file.metadata);
      },
      py::arg("path"),
      R"(Reads a .npy, .npz, .safetensors or .btf file (by extension).

Returns (tensors, metadata): tensors by name, in file order, as in
Archive.load() (read-only views into the mapped file where the data allows;
bfloat16 as uint16 bits, float8_e4m3fn and float8_e5m2 as uint8 bits); metadata is safetensors' "__metadata__" ({} for
the other formats). A .npy tensor is named after the file's stem, BTF
tensors "0", "1"... Quantized tensors written as integers + scales (NAME,
NAME.scales, NAME.zero_points, NAME.quantization) come back as
QuantizedTensor.)");
  set_public_module(m.attr("read_tensor_file"));

  m.def(
      "write_tensor_file",
      [](const py::object& path, const py::handle& arrays, const py::object& metadata,
         const py::object& bfloat16, const py::object& dtypes) {
        std::filesystem::path p = to_path(path);
        // {name: dtype name} of the arrays given as raw bits (_values.py).
        const py::dict raw_bits(helper("_values", "raw_bits_marks")(bfloat16, dtypes));
        py::object to_savable = helper("_values", "to_savable");
        std::vector<convert::NamedTensor> tensors;
        for (py::handle item : arrays.attr("items")()) {
          py::tuple pair = py::reinterpret_borrow<py::tuple>(item);
          std::string name = pair[0].cast<std::string>();
          py::tuple savable = to_savable(name, pair[1], raw_bits.attr("get")(py::str(name)));
          if (savable[0].cast<std::string>() == "embedding")
            throw py::type_error("parameter '" + name + "': embeddings cannot go in tensor files");
          tensors.push_back({name, tensor_from_savable(savable)});
        }
        convert::StringMap meta = string_map(metadata);
        ReleasedGil release;
        convert::write_tensor_file(p, tensors, meta);
      },
      py::arg("path"), py::arg("arrays"), py::kw_only(), py::arg("metadata") = py::none(),
      py::arg("bfloat16") = py::tuple(), py::arg("dtypes") = py::none(),
      R"(Writes `arrays` (as for Writer.add_tag, with its dtypes= and bfloat16=) to a .npy (exactly one array), .npz,
.safetensors or .btf file, chosen by extension, through a temporary file
renamed over `path`. metadata: str -> str, safetensors only. Raises Error
(code "unsupported") for what the format cannot hold, e.g. strings in
safetensors. A QuantizedTensor goes to .npz and .safetensors as its integers,
scales, zero points and a JSON description (docs/cli.md); .npy and .btf refuse it.)");
  set_public_module(m.attr("write_tensor_file"));

  m.def(
      "import_tensor_files",
      [](const py::object& archive, const std::string& tag, const std::vector<py::object>& paths,
         bool compress, bool dedup, bool durable, bool append) {
        std::filesystem::path a = to_path(archive);
        std::vector<std::filesystem::path> files;
        for (const auto& p : paths) files.push_back(to_path(p));
        // Ctrl-C, as for Writer.commit: noticed before the commit point, the
        // archive is unchanged; after it, the tag is there. Either way
        // KeyboardInterrupt is raised, with a note saying which.
        const PythonProgress interrupt{py::none()};
        const std::string archive_name = a.string();
        Writer::Stats stats;
        try {
          ReleasedGil release;
          stats =
              import_files(a, tag, files, compress, dedup, durable, append, interrupt.callback());
        } catch (const Error& e) {
          if (interrupt.has_error()) interrupt.raise_save_not_done(archive_name, e);
          throw;
        }
        interrupt.raise_if_interrupted_after_save(archive_name);
        return stats;
      },
      py::arg("archive"), py::arg("tag"), py::arg("paths"), py::kw_only(),
      py::arg("compress") = false, py::arg("dedup") = true, py::arg("durable") = true,
      py::arg("append") = true,
      R"(Adds tag `tag` to `archive` made of every tensor of the tensor files `paths`
(.npy/.npz/.safetensors/.btf), without going through numpy: data types are
kept exactly (bfloat16 stays bfloat16). The safetensors files' __metadata__
is kept with the tag (export_tensor_file writes it back); two files that give
one key different values raise InvalidArgumentError.
Quantized tensors written as integers + scales are stored quantized again.
Returns the WriteStats.)");
  set_public_module(m.attr("import_tensor_files"));

  m.def(
      "export_tensor_file",
      [](const py::object& archive, const py::object& path, const std::optional<std::string>& tag,
         const py::object& metadata) {
        std::filesystem::path a = to_path(archive);
        std::filesystem::path p = to_path(path);
        const convert::StringMap given = string_map(metadata);
        std::string t = tag_or_newest(tag);
        ReleasedGil release;
        Archive ar = Archive::open(a);
        convert::StringMap meta;
        if (convert::tensor_format_for_extension(p) == convert::TensorFormat::safetensors) {
          meta = convert::detail::kept_safetensors_metadata(ar, t);
          for (const auto& [key, value] : given) meta[key] = value;
        } else {
          meta = given;
        }
        std::vector<convert::NamedTensor> tensors;
        for (const ParamInfo& info : ar.params(t))
          if (info.kind == BlobKind::tensor)
            tensors.push_back({info.name, ar.tensor(info.name, t)});
        convert::write_tensor_file(p, tensors, meta);
      },
      py::arg("archive"), py::arg("path"), py::arg("tag") = py::none(), py::kw_only(),
      py::arg("metadata") = py::none(),
      R"(Writes every tensor parameter of `tag` (None: the newest) of `archive` to the
tensor file `path` (format by extension, as write_tensor_file; quantized
tensors as integers + scales). Embedding parameters are skipped. A .safetensors
file gets the __metadata__ kept with the tag by import_tensor_files (or
`modelzip import`), updated by `metadata`.)");
  set_public_module(m.attr("export_tensor_file"));

  m.def(
      "imported_metadata",
      [](const py::object& archive, const std::optional<std::string>& tag) {
        std::filesystem::path a = to_path(archive);
        std::string t = tag_or_newest(tag);
        ReleasedGil release;
        return convert::detail::kept_safetensors_metadata(Archive::open(a), t);
      },
      py::arg("archive"), py::arg("tag") = py::none(),
      R"(The safetensors __metadata__ kept with `tag` (None: the newest) of `archive`
by import_tensor_files or `modelzip import` (what export_tensor_file writes
back, and `modelzip info` shows): a dict of str, {} when the tag keeps none.)");
  set_public_module(m.attr("imported_metadata"));
}

}  // namespace modelzip::python
