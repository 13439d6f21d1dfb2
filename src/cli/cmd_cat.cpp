#include <cstdio>
#include <iostream>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/convert.hpp"
#include "modelzip/error.hpp"

namespace modelzip::cli {
namespace {

void write_all(const Bytes& b) {
  if (!b.empty() && std::fwrite(b.data(), 1, b.size(), stdout) != b.size())
    throw Error(ErrorCode::io, "cannot write to standard output");
}

int run(const std::vector<std::string>& argv) {
  Args args(argv, {"--tag"}, {"--npy"});
  args.expect_positionals(2, 2);
  Archive archive = Archive::open(args.at(0, "ARCHIVE"));
  Tensor t = archive.tensor(args.at(1, "PARAM"), args.value_or("--tag", ""), ReadMode::copy);
  if (args.flag("--npy")) {
    convert::write_npy(std::cout, t);
    std::cout.flush();
    return 0;
  }
  std::cout.flush();
  if (t.layout() == Layout::sparse_coo)
    throw Error(
        ErrorCode::unsupported,
        "'" + argv[1] + "' is sparse; raw output is for dense tensors (use modelzip export)");
  if (t.dtype() == DType::utf8) {
    for (std::uint64_t i = 0; i < t.numel(); ++i) {
      std::string_view s = t.string_at(i);
      std::fwrite(s.data(), 1, s.size(), stdout);
      std::fputc('\n', stdout);
    }
  } else {
    write_all(t.values());
  }
  if (std::fflush(stdout) != 0) throw Error(ErrorCode::io, "cannot write to standard output");
  return 0;
}

}  // namespace

extern const Command kCatCommand{
    "cat", "Write one tensor to standard output (raw bytes or .npy)",
    "modelzip cat ARCHIVE PARAM [--tag T] [--npy]",
    "Without --npy: the raw little-endian, row-major element bytes (string tensors:\n"
    "one string per line). With --npy: a complete NumPy .npy file; bfloat16 is\n"
    "written as raw '<u2' (numpy has no bfloat16).\n"
    "The data's CRC-32 is checked.\n"
    "\nExamples:\n  modelzip cat model.zip fc1.weight > w.bin\n"
    "  modelzip cat model.zip fc1.weight --npy > w.npy\n",
    run};

}  // namespace modelzip::cli
