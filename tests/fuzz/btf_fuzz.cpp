// Fuzz target: a TFRT Binary Tensor Format file (convert::read_btf), written
// back as BTF and read again: the same tensors in the same order.
#include <cstdint>
#include <sstream>

#include "tensor_file_checks.hpp"

using namespace modelzip;
using namespace modelzip::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<convert::NamedTensor> tensors;
  if (!attempt([&] { tensors = convert::read_btf(input_bytes(data, size)); })) return 0;
  for (const auto& named : tensors) keep(touch(named.tensor));
  std::vector<convert::NamedTensor> again;
  FUZZ_CHECK(attempt([&] {
    std::ostringstream out;
    convert::write_btf(out, tensors);
    again = convert::read_btf(stream_bytes(out));
  }));
  FUZZ_CHECK(by_name(again) == by_name(tensors) && again.size() == tensors.size());
  return 0;
}
