#include <filesystem>
#include <iostream>
#include <map>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/embedding_source.hpp"
#include "cli/formats.hpp"
#include "cli/open_archive.hpp"
#include "cli/progress_bar.hpp"
#include "cli/terminal.hpp"
#include "convert/kept_metadata.hpp"
#include "finalfusion/embeddings_state.hpp"
#include "format/tag_name.hpp"
#include "io/mapped_file.hpp"
#include "modelzip/convert.hpp"
#include "modelzip/error.hpp"
#include "modelzip/finalfusion/convert.hpp"
#include "modelzip/finalfusion/embeddings.hpp"
#include "modelzip/writer.hpp"

namespace modelzip::cli {
namespace {

namespace fs = std::filesystem;

// The embedding format of `path`: from --format, else by content and
// extension (finalfusion::detect_embedding_format).
finalfusion::EmbeddingFormat embedding_format(const fs::path& path, const Bytes& data,
                                              const std::optional<std::string>& forced) {
  if (forced) {
    auto f = finalfusion::embedding_format_from_name(*forced);
    if (!f) throw unknown_format_option(*forced);
    return *f;
  }
  if (auto f = finalfusion::detect_embedding_format(path, data.as_string_view().substr(0, 4096)))
    return *f;
  throw unknown_extension(path);
}

// What a pickle `head` (a file's first bytes) is, or "" for none: torch.save writes a zip of
// <name>/data.pkl, <name>/data/0... (torch >= 1.6) or a pickle that starts with torch's magic
// number (older torch); other pickles start with the PROTO opcode. Detected by content, since
// the extension says nothing (Hugging Face's pytorch_model.bin would read as word2vec).
std::string_view pickle_kind(std::string_view head) {
  constexpr std::string_view torch_magic = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8";
  if (head.starts_with("PK\x03\x04") && head.find("/data.pkl") != std::string_view::npos)
    return "a torch.save file (a Python pickle)";
  if (head.starts_with(torch_magic)) return "a torch.save file (a Python pickle)";
  if (head.size() >= 2 && head[0] == '\x80' && head[1] >= 2 && head[1] <= 5)
    return "a Python pickle";
  return {};
}

// `text` as a single-quoted Python string literal (for a line to paste into Python).
std::string python_literal(std::string_view text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

// True when `head` (a file's first bytes) is an HDF5 file (h5py, Keras .h5): its signature
// starts the superblock, at offset 0 or, behind a user block, at 512, 1024, 2048...
bool is_hdf5(std::string_view head) {
  constexpr std::string_view signature = "\x89HDF\r\n\x1a\n";
  for (std::size_t offset = 0; offset < head.size(); offset = offset == 0 ? 512 : offset * 2)
    if (head.substr(offset).starts_with(signature)) return true;
  return false;
}

int run(const std::vector<std::string>& argv) {
  Args args(argv, {"--tag", "--name", "--format", "--utf8", "--keep-last"},
            {"--no-dedup", "--compress", "--replace", "--no-normalize"});
  const finalfusion::Utf8Policy utf8 = utf8_policy(args);
  args.expect_positionals(2, SIZE_MAX, {"ARCHIVE", "FILE"});
  // "-" is not standard input or output here (a file named - is ./-).
  for (std::size_t i = 0; i < args.positional().size(); ++i)
    args.path_at(i, i == 0 ? "ARCHIVE" : "FILE");
  for (std::size_t i = 0; i < args.positional().size(); ++i)
    if (args.positional()[i] == "-")
      throw UsageError(i == 0 ? "ARCHIVE '-': import writes an archive file, not standard output"
                              : "FILE '-': import reads files, not standard input (save it to a "
                                "file first)");
  const std::string& archive = args.path_at(0, "ARCHIVE");
  require_writable(archive);
  auto tag = args.value("--tag");
  if (!tag) throw UsageError("--tag is required");
  // --format, when given, is the format of every FILE; else the extension tells tensor
  // files, and the content or extension an embedding file's format.
  const std::optional<std::string> forced = args.value("--format");
  const std::optional<convert::TensorFormat> forced_tensors =
      forced ? tensor_format_named(*forced) : std::nullopt;
  const auto reads_tensors = [&](const fs::path& file) {
    return forced ? forced_tensors.has_value()
                  : convert::tensor_format_for_extension(file).has_value();
  };
  std::size_t embedding_files = 0;
  for (std::size_t i = 1; i < args.positional().size(); ++i)
    embedding_files += !reads_tensors(args.positional()[i]);
  if (args.value("--name") && embedding_files != 1)
    throw UsageError("--name needs exactly one embedding file");
  if (args.flag("--no-normalize") && embedding_files == 0)
    throw UsageError("--no-normalize applies to embedding files that are converted");
  const ParamOptions options{args.flag("--compress") ? Compression::deflate : Compression::store};
  const long long keep_last = args.number_or("--keep-last", 0, 1, 1000000000);

  // Everything read here stays alive until the commit (tensors are views).
  std::vector<Bytes> keep_alive;
  NewTag contents;
  std::size_t tensors = 0, embeddings = 0;
  convert::StringMap safetensors_metadata;  // kept in <tag>/metadata.toml
  // Adds parameter `name` from `file` through `add`: errors name the file,
  // a name two files hold names both.
  std::map<std::string, fs::path> source_of;
  const auto add_from = [&](const std::string& name, const fs::path& file, const auto& add) {
    if (auto [it, fresh] = source_of.emplace(name, file); !fresh)
      throw Error(ErrorCode::invalid_argument, "parameter " + quoted_name(name) + " is in both " +
                                                   it->second.string() + " and " + file.string());
    try {
      add();
    } catch (const Error& e) {
      throw e.with_context({.archive = file.string()});
    }
  };
  for (std::size_t i = 1; i < args.positional().size(); ++i) {
    const fs::path file = args.positional()[i];
    if (reads_tensors(file)) {
      convert::TensorFile tf = forced_tensors ? convert::read_tensor_file(file, *forced_tensors)
                                              : convert::read_tensor_file(file);
      convert::detail::merge_file_metadata(safetensors_metadata, tf, file);
      for (auto& nt : tf.tensors) {
        add_from(nt.name, file, [&] { contents.add(nt.name, nt.tensor, options); });
        ++tensors;
      }
      continue;
    }
    Bytes data;
    try {
      finalfusion::detail::refuse_url(file);
      data = io::map_file(file);
    } catch (const Error& e) {
      throw e.with_context({.archive = file.string()});
    }
    if (!args.value("--format")) {
      if (auto kind = pickle_kind(data.as_string_view().substr(0, 4096)); !kind.empty())
        throw Error(ErrorCode::unsupported,
                    std::string(kind) +
                        ", which modelzip does not read (unpickling can run code): convert it "
                        "in Python with modelzip.torch.save(torch.load(" +
                        python_literal(file.string()) + ", weights_only=True), " +
                        python_literal(archive) + ", " + python_literal(*tag) + ")",
                    {.archive = file.string()});
      if (is_hdf5(data.as_string_view().substr(0, 4096)))
        throw Error(ErrorCode::unsupported,
                    "an HDF5 file, which modelzip does not read: read its datasets with h5py "
                    "and save them with modelzip.save (docs/python.md, \"HDF5 files\")",
                    {.archive = file.string()});
      // A modelzip archive given as a FILE (the arguments swapped): modelzip writes
      // modelzip.toml as its first entry.
      if (const auto head = data.as_string_view().substr(0, 64);
          head.starts_with("PK\x03\x04") && head.find("modelzip.toml") != std::string_view::npos)
        throw Error(ErrorCode::invalid_argument,
                    "a modelzip archive, not a tensor or embedding file: the archive to add to "
                    "comes first (modelzip import ARCHIVE --tag T FILE...; export writes "
                    "tensor files)",
                    {.archive = file.string()});
    }
    finalfusion::EmbeddingFormat format = embedding_format(file, data, args.value("--format"));
    Bytes fifu = data;
    if (format != finalfusion::EmbeddingFormat::finalfusion) {
      finalfusion::ConvertReport report;
      fifu = finalfusion::load(
                 file, format,
                 finalfusion::ConvertOptions{
                     .utf8 = utf8, .normalize = !args.flag("--no-normalize"), .report = &report})
                 .to_bytes();
      report_conversion(file.string(), report);
    }
    keep_alive.push_back(fifu);
    const std::string name = args.value_or("--name", file.stem().string());
    add_from(name, file, [&] { contents.add_embedding(name, fifu); });
    ++embeddings;
  }
  convert::detail::keep_metadata(contents, safetensors_metadata);
  ProgressBar bar("saving");
  WriterOptions saving = writer_options(archive, bar.callback());
  saving.dedup = !args.flag("--no-dedup");
  Writer writer = Writer::open(archive, std::move(saving));
  try {
    if (args.flag("--replace"))
      writer.replace_tag(*tag, std::move(contents));
    else
      writer.add_tag(*tag, std::move(contents));
    if (keep_last > 0) writer.keep_last(static_cast<std::size_t>(keep_last));
    writer.commit();
  } catch (const Error& e) {
    throw format::with_replace_hint(e, "--replace replaces it");
  }
  const auto& s = writer.last_stats();
  std::cerr << "tag " << quoted_name(*tag) << ": " << tensors << " tensor(s), " << embeddings
            << " embedding(s); " << s.blobs_written << " new blob(s), " << s.blobs_deduplicated
            << " shared by dedup; " << human_bytes(s.bytes_written) << " written"
            << (s.appended ? " (appended)" : "");
  if (s.bytes_freed > 0) std::cerr << "; " << human_bytes(s.bytes_freed) << " freed in place";
  std::cerr << "\n";
  return 0;
}

}  // namespace

extern const Command kImportCommand{
    "import",
    "Add a tag made of tensor and embedding files",
    "modelzip import ARCHIVE --tag T FILE... [--replace] [--keep-last N] [--no-dedup] [--compress]"
    " [--name NAME] [--format F] [--utf8 P] [--no-normalize]",
    "Tensor files: .npy (named after the file), .npz and .safetensors (their keys),\n"
    ".btf (\"0\", \"1\", ...). A safetensors file's __metadata__ is kept with the tag\n"
    "(<tag>/metadata.toml) and written back by export to .safetensors. FP8 tensors\n"
    "(safetensors F8_E4M3, F8_E5M2) become float8_e4m3fn, float8_e5m2, and MXFP4's\n"
    "F8_E8M0 and F4 float8_e8m0fnu and float4_e2m1fn_x2 (one byte per pair of FP4\n"
    "values: F4's last dimension is halved, refused when odd); numpy has no\n"
    "such types (.npy/.npz hold their bits as uint8). Complex arrays (numpy c8/c16,\n"
    "safetensors C64) become complex64/complex128. Quantized\n"
    "tensors as export writes them (NAME, NAME.scales, NAME.zero_points and the\n"
    "NAME.quantization description, see export --help) become quantized tensors\n"
    "NAME again, checked as archives are.\n"
    "Embedding files become embedding parameters named after\n"
    "the file (or --name): .fifu as is; converted to finalfusion:\n"
    "  word2vec binary (.bin), word2vec / GloVe text (.txt, .vec; with or without\n"
    "  the dims line), floret text (--format floret), and fastText models (.bin,\n"
    "  .ftz; format version <= 12): unsupervised (cbow, skipgram) and supervised\n"
    "  (labels are left out), with character n-grams (fastText vocabulary, dense)\n"
    "  or without (-maxn 0: simple vocabulary), quantized .ftz (without n-grams\n"
    "  the quantized storage is kept; with n-grams reconstructed to a dense matrix,\n"
    "  pruned buckets as zero rows). Refused, with the reason: format versions\n"
    "  above 12, inconsistent headers, a .ftz that would expand to more than 256\n"
    "  times its size.\n"
    "torch.save files (.pt, .pth, pytorch_model.bin) and other Python pickles are\n"
    "refused (unpickling can run code), with the Python line that converts them;\n"
    "HDF5 files (h5py, Keras .h5) too, naming the docs/python.md section that does.\n"
    "The archive is created if needed; a tag that exists (in any letter case) is an\n"
    "error and changes nothing, unless --replace. Parameters whose bytes equal a\n"
    "stored blob are shared unless --no-dedup.\n"
    "Options:\n"
    "  --tag T          the new tag (required)\n"
    "  --replace        replace tag T if it exists, in the same commit (readers see the\n"
    "                   old tag or the new one); T becomes the newest tag\n"
    "  --keep-last N    then keep only the newest N tags, in the same commit: older ones\n"
    "                   are removed as rm-tag removes them (in place)\n"
    "  --compress       deflate the tensors (default: stored, zero-copy)\n"
    "  --no-dedup       store every parameter even when equal bytes exist\n"
    "  --name NAME      the parameter name of a single embedding file\n"
    "  --format F       the format of every FILE, whatever its extension: tensors npy\n"
    "                   npz safetensors btf (as export --format writes them), embeddings\n"
    "                   finalfusion word2vec text textdims fasttext floret\n"
    "  --utf8 P         words that are not valid UTF-8: strict (default) refuses the file,\n"
    "                   lossy replaces invalid bytes by U+FFFD (words that then collide\n"
    "                   are an error), escape keeps every word reversibly: a backslash\n"
    "                   becomes \\\\, an invalid byte \\xNN; export writes the original bytes\n"
    "  --no-normalize   converted embeddings keep their vectors as the file has them, which\n"
    "                   export then writes back bit for bit (default: unit rows and their\n"
    "                   norms, as finalfusion stores them; export multiplies them again,\n"
    "                   which may differ from the file's value in the last bit; a row\n"
    "                   with inf or nan, or whose norm is beyond float32, is refused\n"
    "                   naming its line and column or offset)\n"
    "\nExamples:\n  modelzip import model.zip --tag step-100 weights.safetensors\n"
    "  modelzip import model.zip --tag latest --replace weights.safetensors\n"
    "  modelzip import model.zip --tag step-200 --keep-last 5 weights.safetensors\n"
    "  modelzip import model.zip --tag v1 layer1.npy extra.npz\n"
    "  modelzip import model.zip --tag v1 vectors.bin --name words\n",
    run,
    1,
    true};

}  // namespace modelzip::cli
