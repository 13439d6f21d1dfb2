// Fuzz target: a fastText model (.bin, `modelzip import --format fasttext`),
// read with strict and with lossy UTF-8; what is read goes through
// check_embeddings.
#include <cstdint>
#include <optional>

#include "embeddings_checks.hpp"
#include "modelzip/finalfusion_convert.hpp"

using namespace modelzip;
using namespace modelzip::fuzz;
using namespace modelzip::finalfusion;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Bytes input = input_bytes(data, size);
  for (ConvertOptions options :
       {ConvertOptions{Utf8Policy::strict, true}, ConvertOptions{Utf8Policy::lossy, false}}) {
    std::optional<Embeddings> embeddings;
    if (!attempt([&] { embeddings.emplace(read_fasttext(input, options)); })) continue;
    FUZZ_CHECK(attempt([&] { check_embeddings(*embeddings); }));
  }
  return 0;
}
