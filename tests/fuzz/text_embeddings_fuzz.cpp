// Fuzz target: the text embedding formats (`modelzip import --format text /
// textdims / floret`): GloVe-style text, word2vec text with its "rows dims"
// line, and floret text vectors. The same bytes go to every reader (strict
// and lossy UTF-8); what is read goes through check_embeddings.
#include <cstdint>
#include <optional>

#include "embeddings_checks.hpp"
#include "modelzip/finalfusion_convert.hpp"

using namespace modelzip;
using namespace modelzip::fuzz;
using namespace modelzip::finalfusion;

namespace {

template <class Read>
void read_and_check(Read read) {
  std::optional<Embeddings> embeddings;
  if (!attempt([&] { embeddings.emplace(read()); })) return;
  FUZZ_CHECK(attempt([&] { check_embeddings(*embeddings); }));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Bytes input = input_bytes(data, size);
  for (ConvertOptions options :
       {ConvertOptions{Utf8Policy::strict, true}, ConvertOptions{Utf8Policy::lossy, false}}) {
    read_and_check([&] { return read_text(input, options); });
    read_and_check([&] { return read_text_dims(input, options); });
  }
  read_and_check([&] { return read_floret_text(input); });
  return 0;
}
