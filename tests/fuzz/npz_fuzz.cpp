// Fuzz target: a NumPy .npz archive (convert::read_npz: modelzip's zip
// layer, then one .npy per member); every member is written back as .npy
// and read again (check_npy_round_trip); quantized tensors written as plain
// arrays are joined as import joins them (check_quantized_join).
#include <cstdint>

#include "tensor_file_checks.hpp"

using namespace modelzip;
using namespace modelzip::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<convert::NamedTensor> tensors;
  if (!attempt([&] { tensors = convert::read_npz(input_bytes(data, size)); })) return 0;
  FUZZ_CHECK(attempt([&] { check_npy_round_trip(tensors); }));
  check_quantized_join({convert::TensorFormat::npz, tensors, {}});
  return 0;
}
