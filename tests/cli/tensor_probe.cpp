// Test helper for tests/cli/test_foreign_zips.py: reads tensors through the
// public C++ API and prints, per tensor, one line
//   <name> <dtype> [<dims>] <nbytes> nonzero=<index>:<value>,...
// (float32 values, at most 16 non-zero elements listed), so that the test
// can compare them with what numpy wrote, independently of the CLI.
//
//   tensor_probe npz FILE          convert::read_tensor_file (zero-copy)
//   tensor_probe archive ARCHIVE TAG
//                                  Archive::open, load(TAG) zero-copy
// Exit status 1 with the error on stderr on any modelzip::Error.
#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>

#include "modelzip/convert.hpp"
#include "modelzip/modelzip.hpp"

using namespace modelzip;

namespace {

void print(const std::string& name, const Tensor& t) {
  std::cout << name << ' ' << dtype_name(t.dtype()) << " [";
  for (std::size_t i = 0; i < t.rank(); ++i) std::cout << (i ? "," : "") << t.shape()[i];
  std::cout << "] " << t.nbytes() << " nonzero=";
  if (t.dtype() == DType::float32) {
    const std::span<const float> v = t.as<float>();
    int listed = 0;
    for (std::size_t i = 0; i < v.size() && listed < 16; ++i)
      if (v[i] != 0.0f) std::cout << (listed++ ? "," : "") << i << ':' << v[i];
  }
  std::cout << '\n';
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "npz" && argc == 3) {
      for (const auto& t : convert::read_tensor_file(argv[2]).tensors) print(t.name, t.tensor);
    } else if (mode == "archive" && argc == 4) {
      Archive archive = Archive::open(argv[2]);
      for (const auto& [name, t] : archive.load(argv[3])) print(name, t);
    } else {
      std::cerr << "usage: tensor_probe npz FILE | archive ARCHIVE TAG\n";
      return 2;
    }
  } catch (const Error& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
  return 0;
}
