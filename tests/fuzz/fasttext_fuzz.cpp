// Fuzz target: a fastText model (.bin, `modelzip import --format fasttext`),
// read with strict and with lossy UTF-8; what is read goes through
// check_embeddings.
#include <cstdint>

#include "embeddings_checks.hpp"
#include "modelzip/finalfusion/convert.hpp"

using namespace modelzip;
using namespace modelzip::fuzz;
using namespace modelzip::finalfusion;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Bytes input = input_bytes(data, size);
  for (const ConvertOptions& options : kConvertOptionSets)
    read_and_check([&] { return read_fasttext(input, options); });
  return 0;
}
