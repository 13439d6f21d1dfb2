#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "checkpoint/tensor_stream.hpp"
#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/open_archive.hpp"
#include "cli/progress_bar.hpp"
#include "cli/terminal.hpp"
#include "convert/npy_format.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/convert.hpp"
#include "modelzip/error.hpp"

namespace modelzip::cli {
namespace {

void write_all(std::string_view b) {
  if (!b.empty() && std::fwrite(b.data(), 1, b.size(), stdout) != b.size())
    throw Error(ErrorCode::io, "cannot write to standard output");
}

int run(const std::vector<std::string>& argv) {
  Args args(argv, {"--tag"}, {"--npy", "--force", "-f", "--dequantize"}, {"--updater"});
  const auto updater = args.pairs("--updater");
  if (updater.size() > 1) throw UsageError("--updater names one VAR STATE");
  args.expect_positionals(updater.empty() ? 2 : 1, updater.empty() ? 2 : 1, {"ARCHIVE", "PARAM"});
  Archive archive = open_archive(args.path_at(0, "ARCHIVE"));
  const std::string tag = args.value_or("--tag", "");
  const std::string what = updater.empty() ? quoted_name(args.at(1, "PARAM"))
                                           : "updater state " + quoted_name(updater[0].second) +
                                                 " of " + quoted_name(updater[0].first);
  if (updater.empty()) require_tensor(archive, args.at(1, "PARAM"), tag);
  const bool force = args.flag("--force") || args.flag("-f");
  const bool terminal = ::isatty(1) == 1;
  // Like gzip: binary data on a terminal would be garbage at best and
  // terminal escape sequences at worst. Strings are shown escaped instead.
  auto refuse_terminal = [&](DType dtype) {
    if (terminal && !force && (args.flag("--npy") || dtype != DType::utf8))
      throw Error(ErrorCode::invalid_argument,
                  "not writing the binary data of " + what +
                      " to a terminal (redirect it to a file or a pipe, or use --force)");
  };
  // A dense numeric parameter streams through a small buffer (any size,
  // bounded memory); the CRC-32 is checked at the end, so a damaged blob
  // fails the command (exit status 1) after its bytes went out.
  const bool dequantize = args.flag("--dequantize");
  {
    const TensorStream stream =
        updater.empty()
            ? TensorStream(archive, args.at(1, "PARAM"), tag)
            : TensorStream::updater_state(archive, updater[0].first, updater[0].second, tag);
    if (stream.streamable()) {
      refuse_terminal(stream.dtype());
      if (args.flag("--npy"))
        write_all(convert::detail::npy_header(convert::detail::npy_descr(stream.dtype()),
                                              stream.shape()));
      // Reading a cold archive is slow: a bar over the bytes (on a terminal).
      ProgressBar bar("reading");
      std::uint64_t done = 0;
      const std::uint64_t total = stream.value_bytes();
      stream.write_values([&](std::span<const std::byte> piece) {
        write_all(std::string_view(reinterpret_cast<const char*>(piece.data()), piece.size()));
        done += piece.size();
        bar.show(std::min(done, total), total);
      });
      bar.show(total, total);
      if (std::fflush(stdout) != 0) throw Error(ErrorCode::io, "cannot write to standard output");
      return 0;
    }
  }
  // Sparse, string, quantized and big-endian tensors: read whole.
  Tensor t = updater.empty()
                 ? archive.tensor(args.at(1, "PARAM"), tag, ReadMode::copy)
                 : archive.updater_state(updater[0].first, updater[0].second, tag, ReadMode::copy);
  // Quantized: the values the integers stand for (original dtype), or
  // without --dequantize the stored integers as they are (raw only).
  if (dequantize) t = t.dequantize();
  refuse_terminal(t.dtype());
  const ErrorContext context{.archive = archive.name(),
                             .tag = tag.empty() ? archive.newest_tag() : tag};
  if (args.flag("--npy") && t.layout() == Layout::quantized)
    throw Error(ErrorCode::unsupported,
                what +
                    " is quantized: .npy cannot hold its integers and scales (add --dequantize "
                    "for its values, or export it to .npz or .safetensors)",
                context);
  if (args.flag("--npy")) {
    convert::write_npy(std::cout, t);
    std::cout.flush();
    return 0;
  }
  std::cout.flush();
  if (t.layout() == Layout::sparse_coo)
    throw Error(ErrorCode::unsupported,
                what + " is sparse; raw output is for dense tensors (use modelzip export)",
                context);
  if (t.dtype() == DType::utf8) {
    for (std::uint64_t i = 0; i < t.numel(); ++i) {
      std::string_view s = t.string_at(i);
      write_all(terminal && !force ? printable(s) : std::string(s));
      write_all("\n");
    }
  } else {
    write_all(t.values().as_string_view());
  }
  if (std::fflush(stdout) != 0) throw Error(ErrorCode::io, "cannot write to standard output");
  return 0;
}

}  // namespace

extern const Command kCatCommand{
    "cat", "Write one tensor to standard output (raw bytes or .npy)",
    "modelzip cat ARCHIVE (PARAM | --updater VAR STATE) [--tag T] [--npy] [--dequantize]"
    " [--force]",
    "Without --npy: the raw little-endian, row-major element bytes (string tensors:\n"
    "one string per line). With --npy: a complete NumPy .npy file; bfloat16 is\n"
    "written as raw '<u2' and the float8 types and float4_e2m1fn_x2 (one byte per\n"
    "pair of FP4 values) as raw '|u1' (numpy has no such types: the bit\n"
    "patterns); complex64/complex128 as '<c8'/'<c16' (raw:\n"
    "real then imaginary part of each element).\n"
    "A quantized tensor (modelzip quantize) gives its stored integers raw (int4: two\n"
    "per byte, low nibble first), or with --dequantize the values they stand for,\n"
    "in the original dtype (raw or --npy).\n"
    "The data's CRC-32 is checked (a dense tensor streams in bounded memory; if\n"
    "it is damaged, the command fails after its bytes were written). Binary data is\n"
    "not written to a terminal (like\n"
    "gzip): redirect standard output, or use --force; strings shown on a terminal\n"
    "have their control characters escaped.\n"
    "Options:\n"
    "  --tag T                the tag (default: the newest)\n"
    "  --updater VAR STATE    an optimizer state array (see ls --updater) instead of\n"
    "                         a parameter\n"
    "  --npy                  write a .npy file\n"
    "  --dequantize           a quantized tensor's values, not its integers\n"
    "  -f, --force            write binary data even to a terminal\n"
    "\nExamples:\n  modelzip cat model.zip fc1.weight > w.bin\n"
    "  modelzip cat model.zip fc1.weight --npy > w.npy\n"
    "  modelzip cat model.zip --updater fc1.weight M --npy > m.npy\n",
    run};

}  // namespace modelzip::cli
