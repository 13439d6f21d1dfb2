// Quantized tensors beyond loading (arrays.cpp converts them): dequantizing
// a QuantizedTensor built in Python, and quantizing a tag of an archive
// (modelzip/quantize.hpp) into a new tag.
#include "modelzip/quantize.hpp"

#include <pybind11/stl.h>

#include "arrays.hpp"
#include "bindings.hpp"
#include "python_progress.hpp"

namespace modelzip::python {

void bind_quantize(py::module_& m) {
  m.def(
      "_dequantize",
      [](const py::tuple& savable, const std::optional<std::string>& to) {
        Tensor q = tensor_from_savable(savable);
        std::optional<DType> type;
        if (to) {
          type = dtype_from_name(*to);
          if (!type) throw py::value_error("unknown dtype '" + *to + "'");
        }
        Tensor dense;
        {
          ReleasedGil release;
          dense = q.dequantize(type);
        }
        return tensor_to_python(dense, /*writable=*/true);
      },
      py::arg("savable"), py::arg("dtype") = py::none(),
      "QuantizedTensor.dequantize() (internal: takes QuantizedTensor._savable()).");

  py::class_<QuantizeResult> result(m, "QuantizeResult",
                                    "What modelzip.quantize() did (see modelzip/quantize.hpp).");
  result
      .def_readonly("quantized", &QuantizeResult::quantized,
                    "Parameters stored quantized, in params.txt order.")
      .def_readonly("referenced", &QuantizeResult::referenced,
                    "Parameters written as references to the source tag (no copy).")
      .def_readonly("source_bytes", &QuantizeResult::source_bytes,
                    "Data bytes of the quantized parameters in the source tag.")
      .def_readonly("quantized_bytes", &QuantizeResult::quantized_bytes,
                    "Their data bytes now: integers, scales and zero points.")
      .def_readonly("bytes_written", &QuantizeResult::bytes_written, "Bytes the commit wrote.")
      .def_readonly("appended", &QuantizeResult::appended, "Committed by the append path.")
      .def("__repr__", [](const QuantizeResult& r) {
        return "QuantizeResult(quantized=" + std::to_string(r.quantized.size()) +
               " parameters, referenced=" + std::to_string(r.referenced.size()) +
               ", source_bytes=" + std::to_string(r.source_bytes) +
               ", quantized_bytes=" + std::to_string(r.quantized_bytes) +
               ", bytes_written=" + std::to_string(r.bytes_written) + ")";
      });
  set_public_module(result);

  m.def(
      "quantize",
      [](const py::object& path, const std::string& from_tag, const std::string& tag,
         const std::string& scheme, const std::vector<std::string>& params,
         std::uint64_t min_elements, bool durable) {
        QuantizeOptions options;
        auto s = quantize_recipe_from_name(scheme);
        if (!s)
          throw Error(ErrorCode::invalid_argument,
                      "unknown scheme '" + scheme +
                          "' (int8-per-tensor, int8-per-channel, int8-block32 or int4-block32)");
        options.scheme = *s;
        options.params = params;
        options.min_elements = min_elements;
        options.durable = durable;
        const std::filesystem::path p = to_path(path);
        // Ctrl-C, as for Writer.commit: noticed before the commit point, the
        // archive is unchanged; after it, the tag is there. Either way
        // KeyboardInterrupt is raised, with a note saying which.
        const PythonProgress interrupt{py::none()};
        options.progress = interrupt.callback();
        QuantizeResult done;
        try {
          ReleasedGil release;
          done = quantize_tag(p, from_tag, tag, options);
        } catch (const Error& e) {
          if (interrupt.has_error()) interrupt.raise_save_not_done(p.string(), e);
          throw;
        }
        interrupt.raise_if_interrupted_after_save(p.string());
        return done;
      },
      py::arg("path"), py::arg("from_tag"), py::arg("tag"), py::kw_only(),
      py::arg("scheme") = "int8-per-channel", py::arg("params") = std::vector<std::string>{},
      py::arg("min_elements") = 1024, py::arg("durable") = true,
      R"(Adds tag `tag` holding tag `from_tag`'s parameters quantized with `scheme`, in one commit.

Schemes: "int8-per-tensor", "int8-per-channel", "int8-block32", "int4-block32"
(what `modelzip quantize --scheme` offers). `params`: shell-style globs of
the parameters to quantize; empty: floating-point matrices and convolution
kernels of at least `min_elements` elements whose names contain none of
"bias", "norm", "embed". Every other parameter and updater state is a
reference to the blob of `from_tag` (no copy). Returns a QuantizeResult.)");
}

}  // namespace modelzip::python
