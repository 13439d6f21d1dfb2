#include <filesystem>
#include <iostream>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "io/durable_file.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/convert.hpp"
#include "modelzip/error.hpp"
#include "modelzip/finalfusion.hpp"
#include "modelzip/finalfusion_convert.hpp"

namespace modelzip::cli {
namespace {

namespace fs = std::filesystem;

enum class Target { tensors, embedding };

// Writes `data` to `path` crash-safely (temporary file, fsync, rename).
void write_durably(const fs::path& path, const Bytes& data) {
  io::TempFile temp = io::TempFile::beside(path);
  {
    io::OutputFile out(temp.path());
    std::size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::write(out.fd(), data.data() + done, data.size() - done);
      if (n <= 0)
        throw Error(ErrorCode::io, "cannot write", ErrorContext{.archive = path.string()});
      done += static_cast<std::size_t>(n);
    }
    out.close();
  }
  temp.commit(true);
}

int run(const std::vector<std::string>& argv) {
  Args args(argv, {"--tag", "--format"}, {});
  args.expect_positionals(2, SIZE_MAX);
  const auto& pos = args.positional();
  Archive archive = Archive::open(pos.front());
  const fs::path out = pos.back();
  std::vector<std::string> names(pos.begin() + 1, pos.end() - 1);
  const std::string tag = args.value_or("--tag", "");
  std::string format = args.value_or("--format", "");
  if (format.empty()) {
    format = out.extension().string();
    if (!format.empty()) format.erase(0, 1);
    for (char& c : format) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (format == "fifu" || format == "finalfusion" || finalfusion::parse_format(format)) {
    if (names.size() != 1) throw UsageError("an embedding export names exactly one PARAM");
    Bytes file = archive.embedding_file(names[0], tag, ReadMode::copy);
    auto ff =
        format == "fifu" ? finalfusion::Format::finalfusion : *finalfusion::parse_format(format);
    if (ff == finalfusion::Format::finalfusion)
      write_durably(out, file);
    else
      finalfusion::store(finalfusion::Embeddings::read(file, names[0]), out, ff);
    std::cerr << "wrote embedding '" << names[0] << "' to " << out.string() << "\n";
    return 0;
  }
  if (format != "safetensors" && format != "npz" && format != "npy" && format != "btf")
    throw UsageError("unknown format '" + format +
                     "' (safetensors, npz, npy, btf, fifu, word2vec, text, textdims)");
  if (names.empty())
    for (const auto& p : archive.params(tag))
      if (p.kind == BlobKind::tensor) names.push_back(p.name);
  std::vector<convert::NamedTensor> tensors;
  for (const auto& n : names) tensors.push_back({n, archive.tensor(n, tag, ReadMode::copy)});
  if (format == "safetensors")
    convert::write_safetensors(out, tensors);
  else if (format == "npz")
    convert::write_npz(out, tensors);
  else if (format == "btf")
    convert::write_btf(out, tensors);
  else if (tensors.size() == 1)
    convert::write_npy(out, tensors[0].tensor);
  else
    throw UsageError(".npy holds one tensor: name exactly one PARAM");
  std::cerr << "wrote " << tensors.size() << " tensor(s) to " << out.string() << " (" << format
            << ")\n";
  return 0;
}

}  // namespace

extern const Command kExportCommand{
    "export", "Write parameters of a tag to safetensors, npz, npy, BTF or an embedding file",
    "modelzip export ARCHIVE [PARAM...] [--tag T] [--format F] OUT",
    "Without PARAM, every tensor parameter of the tag. The format defaults to OUT's\n"
    "extension: .safetensors (sorted, no gaps, header padded to 8), .npz, .npy (one\n"
    "tensor), .btf (TFRT binary tensors, dense and COO). An embedding parameter is\n"
    "written as a .fifu file, or converted with --format word2vec / text / textdims.\n"
    "Data is CRC-checked on the way out; files are replaced atomically.\n"
    "\nExamples:\n  modelzip export model.zip --tag step-100 weights.safetensors\n"
    "  modelzip export model.zip fc.weight fc.bias small.npz\n"
    "  modelzip export model.zip words vectors.fifu\n",
    run};

}  // namespace modelzip::cli
