// Fuzz target: a NumPy .npy file (convert::read_npy), written back as .npy
// and read again (check_npy_round_trip).
#include <cstdint>

#include "tensor_file_checks.hpp"

using namespace modelzip;
using namespace modelzip::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<convert::NamedTensor> tensors;
  if (!attempt([&] { tensors = convert::read_npy(input_bytes(data, size), "x"); })) return 0;
  FUZZ_CHECK(tensors.size() == 1 && tensors[0].name == "x");
  FUZZ_CHECK(attempt([&] { check_npy_round_trip(tensors); }));
  return 0;
}
