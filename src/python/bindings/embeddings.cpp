// modelzip.Embeddings: finalfusion word embeddings (lookups, similarity
// queries, analogies, quantization) and the converters from and to
// word2vec, GloVe text, fastText and floret files.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <string>
#include <string_view>
#include <vector>

#include "bindings.hpp"
#include "modelzip/finalfusion/convert.hpp"
#include "modelzip/finalfusion/embeddings.hpp"

namespace modelzip::python {
namespace {

using finalfusion::Embeddings;
using finalfusion::WordSimilarity;

py::list similarities(const std::vector<WordSimilarity>& results) {
  py::list out;
  for (const auto& r : results) out.append(py::make_tuple(r.word, r.similarity));
  return out;
}

py::object optional_similarities(const std::optional<std::vector<WordSimilarity>>& results) {
  return results ? py::object(similarities(*results)) : py::none();
}

// A read-only float32 ndarray viewing `data`, which `embeddings` keeps alive.
py::object float_view(const Embeddings& embeddings, std::span<const float> data,
                      std::vector<py::ssize_t> shape) {
  auto* owner = new Embeddings(embeddings);
  py::capsule base(owner, [](void* p) { delete static_cast<Embeddings*>(p); });
  py::array_t<float> array(shape, data.data(), base);
  py::detail::array_proxy(array.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return array;
}

py::array_t<float> to_numpy(const std::vector<float>& v) {
  py::array_t<float> out(static_cast<py::ssize_t>(v.size()));
  std::copy(v.begin(), v.end(), out.mutable_data());
  return out;
}

finalfusion::EmbeddingFormat format_named(const std::string& name) {
  auto format = finalfusion::embedding_format_from_name(name);
  if (!format)
    throw py::value_error("unknown embedding format '" + name +
                          "' (known: finalfusion, word2vec, text, textdims, fasttext, floret)");
  return *format;
}

// Floats of a 1-D array-like of exactly `dims` elements.
py::array_t<float, py::array::c_style | py::array::forcecast> query_vector(const py::object& v,
                                                                           std::size_t dims) {
  auto array = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(v);
  if (!array) throw py::type_error("query must be a float array-like");
  if (array.ndim() != 1 || static_cast<std::size_t>(array.size()) != dims)
    throw py::value_error("query must be a 1-D array of " + std::to_string(dims) + " floats");
  return array;
}

}  // namespace

void bind_embeddings(py::module_& m) {
  py::class_<Embeddings> cls(m, "Embeddings", R"(finalfusion word embeddings.

Read from a .fifu file (Embeddings.open), from other formats
(Embeddings.load), from an archive's embedding parameter
(Archive.embeddings), or built from a matrix (Embeddings.from_matrix).
Unknown words get embeddings from their subwords when the vocabulary has
subwords. Queries use cosine similarity and release the GIL.
Embeddings are immutable and safe to share between threads.)");
  cls.def_static(
         "open",
         [](const py::object& path, bool mmap) {
           std::filesystem::path p = to_path(path);
           ReleasedGil release;
           return Embeddings::open(p, finalfusion::EmbeddingsOpenOptions{.mmap = mmap});
         },
         py::arg("path"), py::arg("mmap") = true,
         "Reads a finalfusion file (memory-mapped unless mmap=False).")
      .def_static(
          "from_bytes",
          [](const py::bytes& data) {
            Bytes copy = Bytes::copy_of(std::string_view(data));
            ReleasedGil release;
            return Embeddings::read(std::move(copy));
          },
          py::arg("data"), "Parses a complete finalfusion file held in `data` (copied).")
      .def_static(
          "load",
          [](const py::object& path, const std::string& format, bool normalize, bool lossy,
             const std::optional<std::string>& utf8) {
            std::filesystem::path p = to_path(path);
            finalfusion::ConvertOptions options;
            options.normalize = normalize;
            options.utf8 = lossy ? finalfusion::Utf8Policy::lossy : finalfusion::Utf8Policy::strict;
            if (utf8) {
              auto policy = finalfusion::utf8_policy_from_name(*utf8);
              if (!policy)
                throw py::value_error("unknown utf8 policy '" + *utf8 +
                                      "' (known: strict, lossy, escape)");
              if (lossy && *policy != finalfusion::Utf8Policy::lossy)
                throw py::value_error("lossy=True contradicts utf8='" + *utf8 + "'");
              options.utf8 = *policy;
            }
            finalfusion::ConvertReport report;
            options.report = &report;
            finalfusion::EmbeddingFormat f = format_named(format);
            std::optional<Embeddings> result;
            {
              ReleasedGil release;
              result.emplace(finalfusion::load(p, f, options));
            }
            if (report.words_replaced > 0) {
              const std::string message =
                  std::to_string(report.words_replaced) +
                  " word(s) had invalid UTF-8 replaced by U+FFFD (lossy policy)";
              if (PyErr_WarnEx(PyExc_UnicodeWarning, message.c_str(), 1) != 0)
                throw py::error_already_set();
            }
            return std::move(*result);
          },
          py::arg("path"), py::arg("format") = "finalfusion", py::kw_only(),
          py::arg("normalize") = true, py::arg("lossy") = false, py::arg("utf8") = py::none(),
          R"(Reads embeddings in `format`: "finalfusion", "word2vec" (binary),
"text" (GloVe), "textdims" (word2vec text), "fasttext" (.bin or quantized .ftz)
or "floret" (text).
normalize: store unit rows and keep the norms (as finalfusion does).
utf8: how words that are not valid UTF-8 are handled: "strict" (the default,
an error), "lossy" (invalid bytes become U+FFFD; a UnicodeWarning says how
many words changed) or "escape" (reversibly: \\ for a backslash, \xNN for an
invalid byte; save() writes the original bytes back).
lossy: the same as utf8="lossy".)")
      .def_static(
          "from_matrix",
          [](std::vector<std::string> words,
             py::array_t<float, py::array::c_style | py::array::forcecast> matrix,
             const std::optional<std::vector<float>>& norms) {
            if (matrix.ndim() != 2) throw py::value_error("matrix must be 2-D (words x dims)");
            if (static_cast<std::size_t>(matrix.shape(0)) != words.size())
              throw py::value_error("matrix has " + std::to_string(matrix.shape(0)) + " rows for " +
                                    std::to_string(words.size()) + " words");
            auto dims = static_cast<std::size_t>(matrix.shape(1));
            std::vector<float> data(matrix.data(), matrix.data() + matrix.size());
            return Embeddings::from_matrix(finalfusion::Vocab::simple(std::move(words)),
                                           std::move(data), dims, norms);
          },
          py::arg("words"), py::arg("matrix"), py::arg("norms") = py::none(),
          "Embeddings of `words` (a simple vocabulary), one matrix row each; "
          "optional original norms, one per word.")
      .def(
          "save",
          [](const Embeddings& e, const py::object& path, const std::string& format,
             bool normalize) {
            std::filesystem::path p = to_path(path);
            finalfusion::EmbeddingFormat f = format_named(format);
            ReleasedGil release;
            finalfusion::store(p, e, f, finalfusion::WriteOptions{.normalize = normalize});
          },
          py::arg("path"), py::arg("format") = "finalfusion", py::kw_only(),
          py::arg("normalize") = false,
          R"(Writes the embeddings to `path` (through a temporary file renamed over it)
in `format` (any of load()'s but "fasttext"). Text and word2vec formats hold
the word rows only, as the original vectors (each row times its norm, as
`modelzip export` writes them and the reference tools' files hold them);
normalize=True writes the rows as stored (unit rows when normalized,
export --normalized), as C++ WriteOptions{.normalize}. The keyword of earlier
releases, unnormalize= (its opposite), still works with a DeprecationWarning.
A finalfusion file keeps rows and norms as stored: embeddings read from one
(open, from_bytes, Archive.embeddings) write its bytes unchanged. word2vec
and text files end a word at whitespace: a word they cannot hold (a phrase,
"") raises InvalidArgumentError naming it, and nothing is written; so does a
component that is not finite (NaN, inf; also a row times an infinite norm),
which their readers cannot normalize.)")
      .def(
          "to_bytes",
          [](const Embeddings& e) {
            Bytes b;
            {
              ReleasedGil release;
              b = e.to_bytes();
            }
            return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
          },
          "The embeddings as a finalfusion file: the file they were read from, byte for byte "
          "(open, from_bytes, Archive.embeddings), else their encoding.")
      .def_property_readonly(
          "name", [](const Embeddings& self) { return self.name(); },
          "The name given when reading (or \"\").")
      .def_property_readonly("dims", &Embeddings::dims, "Components per vector.")
      .def_property_readonly("rows", &Embeddings::rows, "Storage rows (words and subword rows).")
      .def("__len__", [](const Embeddings& e) { return e.vocab().words_len(); })
      .def_property_readonly(
          "words",
          [](const Embeddings& e) {
            auto w = e.vocab().words();
            return std::vector<std::string>(w.begin(), w.end());
          },
          "The known words, in storage row order (a new list).")
      .def_property_readonly(
          "vocab_kind",
          [](const Embeddings& e) {
            return std::string(finalfusion::vocab_kind_name(e.vocab().kind()));
          },
          "The vocabulary type (\"simple\", \"bucket_subwords\", \"fasttext_subwords\"...).")
      .def_property_readonly("quantized", &Embeddings::quantized,
                             "True for product-quantized storage.")
      .def_property_readonly(
          "metadata",
          [](const Embeddings& e) -> std::optional<std::string> {
            if (!e.metadata()) return std::nullopt;
            return e.metadata()->toml();
          },
          "The metadata chunk as TOML text, or None.")
      .def_property_readonly(
          "matrix",
          [](const Embeddings& e) -> py::object {
            if (e.quantized()) return py::none();
            return float_view(
                e, e.matrix(),
                {static_cast<py::ssize_t>(e.rows()), static_cast<py::ssize_t>(e.dims())});
          },
          "The storage matrix (rows x dims float32, read-only, zero-copy), or None when quantized.")
      .def_property_readonly(
          "norms",
          [](const Embeddings& e) -> py::object {
            if (!e.has_norms()) return py::none();
            return float_view(e, e.norms(), {static_cast<py::ssize_t>(e.norms().size())});
          },
          "Per-word norms of the original vectors (read-only), or None.")
      .def(
          "word_index",
          [](const Embeddings& e, std::string_view word) { return e.vocab().word_index(word); },
          py::arg("word"), "The row of a known word, or None.")
      .def(
          "embedding",
          [](const Embeddings& e, std::string_view word) -> py::object {
            auto v = e.embedding(word);
            return v ? py::object(to_numpy(*v)) : py::none();
          },
          py::arg("word"),
          "The word's vector (a new float32 array), from subwords for unknown words; "
          "None when there is none.")
      .def(
          "unit_embedding",
          [](const Embeddings& e, std::string_view word) -> py::object {
            auto v = e.unit_embedding(word);
            return v ? py::object(to_numpy(*v)) : py::none();
          },
          py::arg("word"),
          "The word's unit vector, as similar() and analogy() compare it and `modelzip "
          "embed` prints it (a new float32 array): the same bits whether the vectors are "
          "stored as unit rows with norms or as read (normalize=False); None when there "
          "is none.")
      .def(
          "__getitem__",
          [](const Embeddings& e, std::string_view word) {
            auto v = e.embedding(word);
            if (!v) throw py::key_error(std::string(word));
            return to_numpy(*v);
          },
          py::arg("word"))
      .def(
          "__contains__",
          [](const Embeddings& e, std::string_view word) { return e.embedding(word).has_value(); },
          py::arg("word"))
      .def(
          "embeddings",
          [](const Embeddings& e, const std::vector<std::string>& words) {
            std::vector<std::string_view> views(words.begin(), words.end());
            py::array_t<float> out(
                {static_cast<py::ssize_t>(words.size()), static_cast<py::ssize_t>(e.dims())});
            py::array_t<bool> found(static_cast<py::ssize_t>(words.size()));
            std::span<float> out_span(out.mutable_data(), static_cast<std::size_t>(out.size()));
            std::span<bool> found_span(found.mutable_data(), words.size());
            {
              ReleasedGil release;
              e.embeddings_into(views, out_span, found_span);
            }
            return py::make_tuple(out, found);
          },
          py::arg("words"),
          "Batch lookup: (matrix len(words) x dims, found mask); rows of words "
          "without an embedding are zero.")
      .def(
          "norm", [](const Embeddings& e, std::string_view word) { return e.norm(word); },
          py::arg("word"),
          "The norm of the word's original vector, or None when it has no embedding: a known "
          "word's stored norm (its row's L2 norm when the file has none); an unknown word's "
          "subword sum's L2 norm before normalisation (floret: of their mean).")
      .def(
          "similar",
          [](const Embeddings& e, const std::string& word, std::size_t k) {
            std::optional<std::vector<WordSimilarity>> r;
            {
              ReleasedGil release;
              r = e.similar(word, k);
            }
            return optional_similarities(r);
          },
          py::arg("word"), py::arg("k") = 10,
          "The k words most similar (cosine) to `word` as (word, similarity) pairs, best "
          "first, the word itself excluded; None when `word` has no embedding.")
      .def(
          "similar_to",
          [](const Embeddings& e, const py::object& query, std::size_t k,
             const std::vector<std::string>& skip) {
            auto q = query_vector(query, e.dims());
            std::vector<std::string_view> skip_views(skip.begin(), skip.end());
            std::vector<WordSimilarity> r;
            {
              ReleasedGil release;
              r = e.similar_to(std::span<const float>(q.data(), e.dims()), k, skip_views);
            }
            return similarities(r);
          },
          py::arg("vector"), py::arg("k") = 10, py::arg("skip") = std::vector<std::string>{},
          "The k words most similar to `vector` (dims floats), skipping the words in `skip`.")
      .def(
          "analogy",
          [](const Embeddings& e, const std::string& a, const std::string& b, const std::string& c,
             std::size_t k) {
            std::optional<std::vector<WordSimilarity>> r;
            {
              ReleasedGil release;
              r = e.analogy(a, b, c, k);
            }
            return optional_similarities(r);
          },
          py::arg("a"), py::arg("b"), py::arg("c"), py::arg("k") = 10,
          "\"a is to b as c is to ?\": the k words most similar to b - a + c, the three "
          "excluded; None when one of them has no embedding.")
      .def(
          "quantize",
          [](const Embeddings& e, std::uint32_t n_subquantizers, std::uint32_t n_centroids,
             std::uint32_t n_iterations, std::uint64_t seed, bool normalize, bool random_rotation) {
            finalfusion::PqOptions options;
            options.n_subquantizers = n_subquantizers;
            options.n_centroids = n_centroids;
            options.n_iterations = n_iterations;
            options.seed = seed;
            options.normalize = normalize;
            options.random_rotation = random_rotation;
            ReleasedGil release;
            auto result = e.quantize(options);
            return std::make_pair(std::move(result.embeddings), result.mean_squared_error);
          },
          py::kw_only(), py::arg("n_subquantizers") = 0, py::arg("n_centroids") = 256,
          py::arg("n_iterations") = 25, py::arg("seed") = 42, py::arg("normalize") = true,
          py::arg("random_rotation") = false,
          "Product-quantizes every storage row; returns (quantized embeddings, mean "
          "squared reconstruction error). Deterministic for a given seed.")
      .def(
          "dequantize",
          [](const Embeddings& e) {
            ReleasedGil release;
            return e.dequantize();
          },
          "A dense copy of quantized embeddings (dense input is returned as is).")
      .def("__repr__", [](const Embeddings& e) {
        return "<modelzip.Embeddings " + std::to_string(e.vocab().words_len()) + " words x " +
               std::to_string(e.dims()) + " dims, " +
               std::string(finalfusion::vocab_kind_name(e.vocab().kind())) +
               (e.quantized() ? ", quantized>" : ">");
      });
  set_public_module(cls);
}

}  // namespace modelzip::python
