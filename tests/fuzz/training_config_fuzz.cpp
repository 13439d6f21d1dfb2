// Fuzz target: a <tag>/trainingConfig.fb buffer, decoded by
// training::decode_training_config, rendered as `modelzip info` does, and
// its learning rate evaluated over a range of iterations and epochs.
//
// Invariants: a decoded config passes validate_training_config, and
// encoding it gives bytes that decode and encode to the same bytes.
#include <cstdint>
#include <limits>

#include "fuzz_support.hpp"
#include "graph/render.hpp"
#include "modelzip/graph/training.hpp"

using namespace modelzip;
using namespace modelzip::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  training::TrainingConfig config;
  if (!attempt([&] { config = training::decode_training_config(input_bytes(data, size)); })) {
    return 0;
  }
  FUZZ_CHECK(attempt([&] { training::validate_training_config(config); }));
  keep(graph::training_config_json(config).size() + graph::training_config_text(config).size());
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  for (std::int64_t i : {std::int64_t{0}, std::int64_t{1}, std::int64_t{7}, std::int64_t{1000},
                         config.iteration_count, config.epoch_count, kMax}) {
    auto rate = training::learning_rate_at(config, i, i);
    if (rate) keep(static_cast<std::uint64_t>(*rate != *rate));
  }
  Bytes encoded, reencoded;
  FUZZ_CHECK(attempt([&] {
    encoded = training::encode_training_config(config);
    reencoded = training::encode_training_config(training::decode_training_config(encoded));
  }));
  FUZZ_CHECK(encoded.as_string_view() == reencoded.as_string_view());
  return 0;
}
