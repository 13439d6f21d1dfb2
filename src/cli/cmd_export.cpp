#include <deque>
#include <filesystem>
#include <iostream>

#include "checkpoint/tensor_stream.hpp"
#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/formats.hpp"
#include "cli/interrupt.hpp"
#include "cli/open_archive.hpp"
#include "cli/progress_bar.hpp"
#include "cli/terminal.hpp"
#include "convert/kept_metadata.hpp"
#include "convert/npy_format.hpp"
#include "convert/tensor_bytes.hpp"
#include "io/atomic_write.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/cancel.hpp"
#include "modelzip/convert.hpp"
#include "modelzip/error.hpp"
#include "modelzip/finalfusion/convert.hpp"
#include "modelzip/finalfusion/embeddings.hpp"

namespace modelzip::cli {
namespace {

namespace fs = std::filesystem;

enum class Target { tensors, embedding };

// Writes `data` to `path` crash-safely (temporary file, fsync, rename).
void write_durably(const fs::path& path, const Bytes& data) {
  io::write_file_atomically(
      path, [&](std::ostream& file) { convert::detail::write_bytes(file, data.span()); }, true);
}

// What the "wrote N tensor(s)" line adds for `raw_bits` tensors of a type numpy lacks
// (bfloat16, float8, float4_e2m1fn_x2) written to .npy/.npz as their bit patterns, which import
// reads back as uint16/uint8; "" for none or another format.
std::string bit_patterns_note(const std::string& format, std::size_t raw_bits) {
  if (raw_bits == 0 || (format != "npy" && format != "npz")) return "";
  return "; " + std::to_string(raw_bits) +
         " as their bit patterns, bfloat16 as uint16, float8 and float4_e2m1fn_x2 as uint8: "
         "numpy has no such types, .safetensors keeps them";
}

bool numpy_lacks(DType dtype) {
  return dtype == DType::bfloat16 || dtype == DType::float8_e4m3fn || dtype == DType::float8_e5m2 ||
         dtype == DType::float8_e8m0fnu || dtype == DType::float4_e2m1fn_x2;
}

int run(const std::vector<std::string>& argv) {
  Args args(argv, {"--tag", "--format"}, {"--normalized", "--dequantize"}, {"--updater"});
  const auto updater = args.pairs("--updater");
  args.expect_positionals(2, SIZE_MAX, {"ARCHIVE", "OUT"});
  const auto& pos = args.positional();
  args.path_at(0, "ARCHIVE");
  args.path_at(pos.size() - 1, "OUT");
  if (pos.back() == "-")
    throw UsageError(
        "OUT '-': export writes a file (cat --npy writes one tensor to standard output)");
  const fs::path out = pos.back();
  if (std::error_code ec; fs::is_directory(out, ec))
    throw UsageError("OUT " + quoted_name(out.string()) +
                     " is a folder: name the file to write in it (e.g. " +
                     printable((out / "model.safetensors").string()) + ")");
  std::vector<std::string> names(pos.begin() + 1, pos.end() - 1);
  const std::string tag = args.value_or("--tag", "");
  // --format, else OUT's extension: a tensor format or an embedding format (the tables
  // import uses, cli/formats.hpp).
  std::optional<convert::TensorFormat> tensor_format;
  std::optional<finalfusion::EmbeddingFormat> embedding_format;
  if (const auto forced = args.value("--format")) {
    tensor_format = tensor_format_named(*forced);
    if (!tensor_format) embedding_format = finalfusion::embedding_format_from_name(*forced);
    if (!tensor_format && !embedding_format) throw unknown_format_option(*forced);
  } else {
    tensor_format = convert::tensor_format_for_extension(out);
    embedding_format = finalfusion::embedding_format_for_extension(out);
    if (!tensor_format && !embedding_format) throw unknown_extension(out);
  }
  // SIGINT and SIGTERM stop the export (exit 130, 143), leaving OUT as it was
  // and no temporary file (io::write_file_atomically), instead of ending the
  // process with a partly written temporary file beside OUT.
  install_interrupt_handlers();
  Archive archive = open_archive(pos.front());
  if (embedding_format) {
    // OUT's extension (.bin, .txt: common names for tensor files too) chose an embedding
    // format: say so when the export is not one embedding parameter.
    const std::string chosen = "OUT " + quoted_name(out.string()) + " is an embedding file (" +
                               std::string(finalfusion::embedding_format_name(*embedding_format)) +
                               "); tensors go to .safetensors, .npz, .npy or .btf";
    if (names.size() != 1 || !updater.empty())
      throw UsageError(chosen + ": an embedding export names exactly one PARAM");
    if (archive.param(names[0], tag).kind != BlobKind::embedding)
      throw Error(ErrorCode::invalid_argument,
                  "parameter " + quoted_name(names[0]) + " is a tensor: " + chosen,
                  {.archive = archive.name(), .tag = tag});
    const bool normalized = args.flag("--normalized");
    Bytes file = archive.embedding_file(names[0], tag, ReadMode::copy);
    if (*embedding_format == finalfusion::EmbeddingFormat::finalfusion) {
      if (normalized)
        throw UsageError(
            "--normalized applies to word2vec and text exports (a .fifu keeps the "
            "rows and norms as stored)");
      write_durably(out, file);
      std::cerr << "wrote embedding " << quoted_name(names[0]) << " to " << printable(out.string())
                << "\n";
      return 0;
    }
    const auto embeddings = finalfusion::Embeddings::read(file, names[0]);
    try {
      finalfusion::store(out, embeddings, *embedding_format,
                         finalfusion::WriteOptions{.normalize = normalized});
    } catch (const Error& e) {
      // A word or value the format cannot hold: say whose it is.
      if (e.code() != ErrorCode::invalid_argument) throw;
      throw e.reworded("embedding " + quoted_name(names[0]) + " of " + archive.name() + ", tag " +
                           quoted_name(tag.empty() ? archive.newest_tag() : tag) + ": " +
                           e.message(),
                       e.context());
    }
    std::cerr << "wrote embedding " << quoted_name(names[0]) << " to " << printable(out.string())
              << " (" << finalfusion::embedding_format_name(*embedding_format) << ", "
              << (normalized               ? "unit rows"
                  : embeddings.has_norms() ? "original norms restored"
                                           : "rows as stored, no norms")
              << ")";
    // These formats hold word rows only: unknown words get no embedding from the file.
    if (const std::size_t left = embeddings.rows() - embeddings.vocab().words_len(); left > 0)
      std::cerr << "; its " << left
                << " subword row(s) are not in that format, so unknown words get no embedding "
                   "from it (a .fifu keeps them)";
    std::cerr << "\n";
    return 0;
  }
  const std::string format(convert::tensor_format_name(*tensor_format));
  if (args.flag("--normalized"))
    throw UsageError("--normalized applies to embedding exports to word2vec or text (." + format +
                     " holds tensors as stored)");
  if (names.empty() && updater.empty()) {
    std::vector<std::string> embeddings;  // written one at a time, by name
    for (const auto& p : archive.params(tag))
      (p.kind == BlobKind::tensor ? names : embeddings).push_back(p.name);
    if (!embeddings.empty()) {
      const std::string how = "export each by name (modelzip export ARCHIVE " + embeddings[0] +
                              " OUT.fifu, or .vec, .txt, .bin)";
      if (names.empty())
        throw Error(ErrorCode::invalid_argument,
                    "has " + std::to_string(embeddings.size()) +
                        " embedding(s) and no tensors to write to " + out.string() + ": " + how,
                    ErrorContext{.archive = archive.name(),
                                 .tag = tag.empty() ? archive.newest_tag() : tag});
      std::cerr << "modelzip: " << embeddings.size() << " embedding(s) not written to "
                << printable(out.string()) << ": " << printable(how) << "\n";
    }
  }
  for (const auto& n : names) require_tensor(archive, n, tag);
  // Streaming exports: a bar over the tensor bytes read (from a cold
  // archive, reading is the long part) and written.
  ProgressBar copying("exporting");
  std::uint64_t copied = 0, to_copy = 0;
  auto copy_values = [&](const TensorStream& stream, std::ostream& file) {
    stream.write_values([&](std::span<const std::byte> piece) {
      // A failed write only fails the stream: stop reading the archive here.
      if (cancel_requested())
        throw Error(ErrorCode::cancelled, "export cancelled (interrupted)",
                    {.archive = out.string()});
      convert::detail::write_bytes(file, piece);
      copied += piece.size();
      copying.show(std::min(copied, to_copy), to_copy);
    });
  };
  // What goes into the file, in order: the parameters under their names,
  // then the updater states as "VAR/STATE".
  auto open_stream = [&](std::size_t i) {
    if (i < names.size()) return TensorStream(archive, names[i], tag);
    const auto& [var, state] = updater[i - names.size()];
    return TensorStream::updater_state(archive, var, state, tag);
  };
  auto output_name = [&](std::size_t i) {
    if (i < names.size()) return names[i];
    const auto& [var, state] = updater[i - names.size()];
    return var + "/" + state;
  };
  const std::size_t count = names.size() + updater.size();
  if (*tensor_format == convert::TensorFormat::npy && count == 1) {
    const TensorStream stream = open_stream(0);
    if (stream.streamable()) {  // any size, in bounded memory
      to_copy = stream.value_bytes();
      io::write_file_atomically(
          out,
          [&](std::ostream& file) {
            const std::string header = convert::detail::npy_header(
                convert::detail::npy_descr(stream.dtype()), stream.shape());
            convert::detail::write_bytes(file, header);
            copy_values(stream, file);
          },
          true);
      copying.show(to_copy, to_copy);
      std::cerr << "wrote 1 tensor(s) to " << printable(out.string()) << " (npy"
                << bit_patterns_note(format, numpy_lacks(stream.dtype())) << ")\n";
      return 0;
    }
  }
  if (*tensor_format != convert::TensorFormat::npy) {
    // Every tensor streams after its header, which needs only its size.
    std::deque<TensorStream> streams;
    std::vector<convert::detail::StreamedTensor> streamed;
    for (std::size_t i = 0; i < count; ++i) {
      const TensorStream& s = streams.emplace_back(open_stream(i));
      if (!s.streamable()) break;
      to_copy += s.value_bytes();
      streamed.push_back({output_name(i), s.dtype(), s.shape(), s.layout(), s.value_bytes(),
                          [&s, &copy_values](std::ostream& file) { copy_values(s, file); }});
    }
    if (streamed.size() == count) {
      try {
        if (*tensor_format == convert::TensorFormat::safetensors)
          convert::detail::write_safetensors_streamed(
              out, streamed, convert::detail::kept_safetensors_metadata(archive, tag));
        else if (*tensor_format == convert::TensorFormat::npz)
          convert::detail::write_npz_streamed(out, streamed);
        else
          convert::detail::write_btf_streamed(out, streamed);
      } catch (const Error& e) {
        throw e.with_context({.archive = out.string()});  // what cannot be written, and where
      }
      copying.show(to_copy, to_copy);
      std::size_t raw_bits = 0;
      for (const auto& t : streamed) raw_bits += numpy_lacks(t.dtype);
      std::cerr << "wrote " << count << " tensor(s) to " << printable(out.string()) << " ("
                << format << bit_patterns_note(format, raw_bits) << ")\n";
      return 0;
    }
  }
  // Sparse, string, quantized or big-endian tensors (and, with one of them,
  // the rest of the file's tensors) are read whole, in any format. Stored blobs are views of the
  // mapped archive (file pages, not memory of this process), CRC-checked first; deflated ones are
  // decompressed whole.
  // Reading (and CRC-checking) is the long part here: a bar over the bytes.
  std::uint64_t total = 0, done = 0;
  for (const auto& n : names) total += archive.param(n, tag).nbytes;
  for (const auto& p : archive.updater_states(tag))
    for (const auto& [var, state] : updater)
      if (p.name == var && p.state == state) total += p.nbytes;
  ProgressBar bar("reading");
  bar.show(0, total);
  std::vector<convert::NamedTensor> tensors;
  const bool dequantize = args.flag("--dequantize");
  auto read = [&](std::string name, Tensor t) {
    done += t.values().size();
    if (dequantize) t = t.dequantize();  // quantized: the values, in the original dtype
    bar.show(std::min(done, total), total);
    tensors.push_back({std::move(name), std::move(t)});
  };
  for (const auto& n : names) {
    TensorStream stream(archive, n, tag);
    if (!archive.param(n, tag).compressed) stream.check();
    read(n, archive.tensor(n, tag, ReadMode::zero_copy));
  }
  for (const auto& [var, state] : updater) {  // named "VAR/STATE" in the file
    const TensorStream stream = TensorStream::updater_state(archive, var, state, tag);
    stream.check();  // a view of a stored blob is not CRC-checked by itself
    read(var + "/" + state, archive.updater_state(var, state, tag, ReadMode::zero_copy));
  }
  bar.show(total, total);
  if (*tensor_format == convert::TensorFormat::npy && tensors.size() != 1)
    throw UsageError(".npy holds one tensor: name exactly one PARAM");
  // Quantized tensors (without --dequantize) go out as their integers,
  // scales, zero points and a description (convert::quantized_to_arrays).
  std::size_t quantized = 0;
  for (const auto& t : tensors) quantized += t.tensor.layout() == Layout::quantized;
  convert::write_tensor_file(out, *tensor_format, tensors,
                             *tensor_format == convert::TensorFormat::safetensors
                                 ? convert::detail::kept_safetensors_metadata(archive, tag)
                                 : convert::StringMap{});
  std::size_t raw_bits = 0;
  for (const auto& t : tensors)  // quantized ones are written as integers and scales
    raw_bits += t.tensor.layout() != Layout::quantized && numpy_lacks(t.tensor.dtype());
  std::cerr << "wrote " << tensors.size() << " tensor(s) to " << printable(out.string()) << " ("
            << format << bit_patterns_note(format, raw_bits);
  if (quantized)
    std::cerr << "; " << quantized
              << " quantized as integers, scales and description, see export --help";
  std::cerr << ")\n";
  return 0;
}

}  // namespace

extern const Command kExportCommand{
    "export", "Write parameters of a tag to safetensors, npz, npy, BTF or an embedding file",
    "modelzip export ARCHIVE [PARAM...] [--updater VAR STATE]... [--tag T] [--format F]"
    " [--dequantize] OUT",
    "Without PARAM or --updater, every tensor parameter of the tag (embeddings are\n"
    "exported one at a time, by name; a tag of only embeddings is an error); updater state\n"
    "arrays are named VAR/STATE in OUT. The format defaults to OUT's extension: .safetensors "
    "(sorted, no gaps, header padded to 8; the __metadata__ of the safetensors files\n"
    "the tag was imported from), .npz, .npy (one\n"
    "tensor), .btf (TFRT binary tensors, dense and COO). An embedding parameter is\n"
    "written by OUT's extension as import reads it: .fifu as stored, .bin word2vec\n"
    "binary, .txt text without a dims line (GloVe), .vec text with a \"rows dims\"\n"
    "line (word2vec / fastText .vec); or --format finalfusion, word2vec, text,\n"
    "textdims, floret. Word rows are multiplied by the stored norms, so the vectors\n"
    "come out as the imported file had them; --normalized writes unit rows instead.\n"
    "Words imported with --utf8 escape are written as their original bytes.\n"
    "Options:\n"
    "  --tag T         the tag (default: the newest)\n"
    "  --format F      the output format when OUT's extension does not tell\n"
    "  --updater VAR STATE\n"
    "                  an optimizer state array (see ls --updater), repeatable\n"
    "  --normalized    embeddings to word2vec or text: unit rows, not the original vectors\n"
    "  --dequantize    quantized tensors (modelzip quantize) as the values they stand\n"
    "                  for, in their original dtype, instead of integers + scales\n"
    "Quantized tensors (without --dequantize; .npz and .safetensors only): NAME\n"
    "becomes the arrays NAME, the integers in the original shape (int8; uint8 for\n"
    "uint8 storage; int4 unpacked to one int8 in [-8, 7] per element), NAME.scales\n"
    "(float64 [] per tensor, float64 [C] per axis with C = shape[axis]; block-wise:\n"
    "float16/float32 as stored, shape[:axis] + [ceil(K / block_size)], K the\n"
    "product of shape[axis:]), NAME.zero_points (int64, shape of NAME.scales;\n"
    "affine schemes only), and NAME.quantization, a JSON object (version 1,\n"
    "scheme, storage, bits, axis, block_size, dtype = the original type): a\n"
    "safetensors __metadata__ entry, in .npz a 0-d unicode array. The values are\n"
    "(NAME - zero_points) * scales in float64 (per axis: scales broadcast along\n"
    "axis; block-wise: each row of K elements times its scales repeated\n"
    "block_size times, cut to K), rounded to dtype. import joins them back.\n"
    "Data is CRC-checked on the way out; files are replaced atomically (a symbolic\n"
    "link stays a link; OUT may not be a pipe or device: cat --npy writes one tensor\n"
    "to standard output). Interrupted (Ctrl-C, SIGTERM: exit 130, 143), it leaves\n"
    "OUT as it was, with no temporary file beside it.\n"
    "\nExamples:\n  modelzip export model.zip --tag step-100 weights.safetensors\n"
    "  modelzip export model.zip fc.weight fc.bias small.npz\n"
    "  modelzip export model.zip words vectors.fifu\n"
    "  modelzip export model.zip words glove.txt\n"
    "  modelzip export model.zip --updater fc.weight M --updater fc.weight V adam.npz\n"
    "  modelzip export model.zip --tag int4 q.safetensors    # integers + scales\n",
    run};

}  // namespace modelzip::cli
