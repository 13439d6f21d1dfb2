// Fuzz target: an archive of checkpoints, loaded as a training job resumes:
// Archive::from_memory, then per tag load_graph, load_training_config,
// load_checkpoint (both read modes) and the `modelzip info` summary.
//
// Invariant: a checkpoint that load_checkpoint returns passes
// check_checkpoint (loading applies every consistency rule).
#include <cstdint>
#include <optional>

#include "fuzz_support.hpp"
#include "graph/render.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/graph/checkpoint.hpp"

using namespace modelzip;
using namespace modelzip::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<Archive> archive;
  if (!attempt(
          [&] { archive.emplace(Archive::from_memory(input_bytes(data, size), "fuzz.zip")); })) {
    return 0;
  }
  for (const std::string& tag : archive->tags()) {
    attempt([&] { keep(load_graph(*archive, tag).variables.size()); });
    attempt([&] { keep(load_training_config(*archive, tag).has_value()); });
    attempt([&] { keep(graph::tag_summary_json(*archive, tag).size()); });
    attempt([&] { keep(graph::tag_summary_text(*archive, tag).size()); });
    for (ReadMode mode : {ReadMode::zero_copy, ReadMode::copy}) {
      Checkpoint checkpoint;
      if (!attempt([&] { checkpoint = load_checkpoint(*archive, tag, mode); })) continue;
      FUZZ_CHECK(attempt([&] { check_checkpoint(checkpoint); }));
      for (const auto& [name, tensor] : checkpoint.params) keep(touch(tensor));
      for (const auto& [variable, states] : checkpoint.updater_state) {
        for (const auto& [state, tensor] : states) keep(touch(tensor));
      }
    }
  }
  return 0;
}
