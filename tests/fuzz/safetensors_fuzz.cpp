// Fuzz target: a safetensors file (convert::read_safetensors, with its
// strict JSON parser); the tensors and metadata are written back as
// safetensors and must read back equal (by name: the writer orders tensors
// its own way). Quantized tensors written as plain arrays are joined as
// import joins them (check_quantized_join).
#include <cstdint>
#include <sstream>

#include "tensor_file_checks.hpp"

using namespace modelzip;
using namespace modelzip::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  convert::TensorFile file;
  if (!attempt([&] { file = convert::read_safetensors(input_bytes(data, size)); })) return 0;
  for (const auto& named : file.tensors) keep(touch(named.tensor));
  convert::TensorFile again;
  FUZZ_CHECK(attempt([&] {
    std::ostringstream out;
    convert::write_safetensors(out, file.tensors, file.metadata);
    again = convert::read_safetensors(stream_bytes(out));
  }));
  FUZZ_CHECK(again.metadata == file.metadata);
  FUZZ_CHECK(by_name(again.tensors) == by_name(file.tensors));
  check_quantized_join(file);
  return 0;
}
