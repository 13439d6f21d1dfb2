#include <iostream>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/json.hpp"
#include "cli/open_archive.hpp"
#include "cli/terminal.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/error.hpp"
#include "modelzip/finalfusion/embeddings.hpp"

namespace modelzip::cli {
namespace {

// What an embedding parameter holds (from its chunk headers), or why it
// cannot be read: a damaged entry does not stop the listing.
struct EmbeddingFacts {
  std::optional<finalfusion::FileSummary> summary;
  std::string error;
};

EmbeddingFacts embedding_facts(const Archive& archive, const ParamInfo& p, const std::string& tag) {
  EmbeddingFacts f;
  try {
    f.summary = finalfusion::summarize(archive.embedding_file(p.name, tag));
  } catch (const Error& e) {
    f.error = e.what();
  }
  return f;
}

// "int8 affine-per-axis axis 0", "int4 block-symmetric block 32 float16
// scales": how a quantized parameter's integers stand for its values.
std::string quantization_text(const Quantization& q) {
  std::string s =
      std::string(quant_storage_name(q.storage)) + " " + std::string(quant_scheme_name(q.scheme));
  if (q.scheme == QuantScheme::affine_per_axis) s += " axis " + std::to_string(q.axis);
  if (q.scheme == QuantScheme::block_symmetric)
    s += " block " + std::to_string(q.block_size) + " " + std::string(dtype_name(q.scale_dtype)) +
         " scales";
  return s;
}

std::string quantization_json(const Quantization& q) {
  std::string s = "{\"scheme\": " + json_string(quant_scheme_name(q.scheme)) +
                  ", \"storage\": " + json_string(quant_storage_name(q.storage)) +
                  ", \"bits\": " + std::to_string(quant_storage_bits(q.storage));
  if (q.scheme == QuantScheme::affine_per_axis) s += ", \"axis\": " + std::to_string(q.axis);
  if (q.scheme == QuantScheme::block_symmetric)
    s += ", \"axis\": " + std::to_string(q.axis) +
         ", \"block_size\": " + std::to_string(q.block_size) +
         ", \"scale_dtype\": " + json_string(dtype_name(q.scale_dtype));
  return s + "}";
}

int run(const std::vector<std::string>& argv) {
  Args args(argv, {"--tag"}, {"--json", "--updater"});
  args.expect_positionals(1, 1, {"ARCHIVE"});
  Archive archive = open_archive(args.path_at(0, "ARCHIVE"));
  std::string tag = args.value_or("--tag", "");
  bool updater = args.flag("--updater");
  // An archive without tags lists nothing (FORMAT.md section 4.1).
  auto params = archive.tags().empty() && tag.empty() ? std::vector<ParamInfo>()
                : updater                             ? archive.updater_states(tag)
                                                      : archive.params(tag);
  std::vector<EmbeddingFacts> embeddings(params.size());
  for (std::size_t i = 0; i < params.size(); ++i)
    if (params[i].kind == BlobKind::embedding) {
      embeddings[i] = embedding_facts(archive, params[i], tag);
      if (embeddings[i].summary)
        params[i].shape = {static_cast<std::int64_t>(embeddings[i].summary->rows),
                           static_cast<std::int64_t>(embeddings[i].summary->dims)};
    }
  if (args.flag("--json")) {
    std::cout << "[";
    for (std::size_t i = 0; i < params.size(); ++i) {
      const ParamInfo& p = params[i];
      std::cout << (i ? ",\n " : "") << "{\"name\": " << json_string(p.name);
      if (updater) std::cout << ", \"state\": " << json_string(p.state);
      std::cout << ", \"kind\": "
                << json_string(p.kind == BlobKind::tensor ? "tensor" : "embedding")
                << ", \"dtype\": " << json_string(dtype_name(p.dtype)) << ", \"shape\": [" <<
          [&] {
            std::string s;
            for (std::size_t d = 0; d < p.shape.size(); ++d)
              s += (d ? ", " : "") + std::to_string(p.shape[d]);
            return s;
          }()
                << "], \"layout\": " << json_string(layout_name(p.layout))
                << ", \"nbytes\": " << p.nbytes << ", \"blob\": " << json_string(p.blob)
                << ", \"shared\": " << json_bool(p.shared)
                << ", \"compressed\": " << json_bool(p.compressed) << ", \"quantization\": "
                << (p.quantization ? quantization_json(*p.quantization) : "null");
      if (p.kind == BlobKind::embedding)
        std::cout << ", \"embedding\": "
                  << (embeddings[i].summary
                          ? finalfusion::summary_json(*embeddings[i].summary)
                          : "{\"error\": " + json_string(embeddings[i].error) + "}");
      std::cout << "}";
    }
    std::cout << "]\n";
    return 0;
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const ParamInfo& p = params[i];
    std::cout << printable(p.name);
    if (updater) std::cout << " [" << printable(p.state) << "]";
    std::cout << "\t"
              << (p.kind == BlobKind::embedding ? "embedding" : std::string(dtype_name(p.dtype)))
              << "\t" << shape_text(p.shape) << "\t" << human_bytes(p.nbytes) << "\t"
              << printable(p.blob);
    if (p.layout == Layout::sparse_coo) std::cout << "\tsparse";
    if (p.quantization) std::cout << "\tquantized " << quantization_text(*p.quantization);
    if (p.shared) std::cout << "\tshared";
    if (p.compressed) std::cout << "\tdeflated";
    if (p.kind == BlobKind::embedding)
      std::cout << "\t"
                << (embeddings[i].summary
                        ? finalfusion::summary_text(*embeddings[i].summary)
                        : "unreadable: " + printable_message(embeddings[i].error));
    std::cout << "\n";
  }
  return 0;
}

}  // namespace

extern const Command kLsCommand{
    "ls", "List the parameters of a tag (dtype, shape, size, blob)",
    "modelzip ls ARCHIVE [--tag T] [--updater] [--json]",
    "Options:\n"
    "  --tag T     the tag (default: the newest)\n"
    "  --updater   list the optimizer state (updater.txt) instead of the parameters\n"
    "  --json      print a JSON array of objects with keys name, kind, dtype, shape,\n"
    "              layout, nbytes, blob, shared, compressed, quantization (null or\n"
    "              {scheme, storage, bits, axis, block_size, scale_dtype}, the last\n"
    "              three where the scheme has them) (and state with --updater);\n"
    "              embeddings add \"embedding\": {vocab, words, subword_rows, min_n,\n"
    "              max_n, rows, dims, storage (array or quantized), quantizer, norms,\n"
    "              metadata} (or {error} when the entry cannot be read)\n"
    "Embeddings show their shape as [storage rows, dims] and, last, the vocabulary\n"
    "kind and size, dims, storage and whether norms are stored. Quantized tensors\n"
    "(modelzip quantize) show their original dtype and shape and, last, how they\n"
    "are stored (e.g. quantized int4 block-symmetric block 32 float16 scales).\n"
    "\nExamples:\n  modelzip ls model.zip\n  modelzip ls model.zip --tag step-100 --json\n",
    run};

}  // namespace modelzip::cli
