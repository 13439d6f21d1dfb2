// Fuzz target: the text embedding formats (`modelzip import --format text /
// textdims / floret`): GloVe-style text, word2vec text with its "rows dims"
// line, and floret text vectors. The same bytes go to every reader (strict
// and lossy UTF-8); what is read goes through check_embeddings.
#include <cstdint>

#include "embeddings_checks.hpp"
#include "modelzip/finalfusion/convert.hpp"

using namespace modelzip;
using namespace modelzip::fuzz;
using namespace modelzip::finalfusion;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Bytes input = input_bytes(data, size);
  for (const ConvertOptions& options : kConvertOptionSets) {
    read_and_check([&] { return read_text(input, options); });
    read_and_check([&] { return read_text_dims(input, options); });
  }
  read_and_check([&] { return read_floret_text(input); });
  return 0;
}
