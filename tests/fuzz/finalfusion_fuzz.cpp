// Fuzz target: a finalfusion (.fifu) file, as `modelzip embed` reads an
// embedding parameter or a standalone file: Embeddings::read, then the
// queries and the write/re-read of check_embeddings.
#include <cstdint>
#include <optional>

#include "embeddings_checks.hpp"

using namespace modelzip;
using namespace modelzip::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<finalfusion::Embeddings> embeddings;
  if (!attempt([&] {
        embeddings.emplace(finalfusion::Embeddings::read(input_bytes(data, size), "fuzz.fifu"));
      })) {
    return 0;
  }
  FUZZ_CHECK(attempt([&] { check_embeddings(*embeddings); }));
  return 0;
}
