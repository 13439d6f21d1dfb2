// Fuzz target: a word2vec binary file (`modelzip import --format word2vec`),
// read with strict and with lossy UTF-8, normalised and not; what is read
// goes through check_embeddings.
#include <cstdint>

#include "embeddings_checks.hpp"
#include "modelzip/finalfusion/convert.hpp"

using namespace modelzip;
using namespace modelzip::fuzz;
using namespace modelzip::finalfusion;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Bytes input = input_bytes(data, size);
  for (const ConvertOptions& options : kConvertOptionSets)
    read_and_check([&] { return read_word2vec_binary(input, options); });
  return 0;
}
