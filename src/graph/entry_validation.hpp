// Validators of the tag-level FlatBuffer entries (<tag>/graph.fb,
// <tag>/trainingConfig.fb), in the shape of checkpoint/entry_validators.hpp's
// EntryValidator. Each decodes the entry completely (verifier + every rule
// of the format) and throws modelzip::Error when it is invalid. This file
// also defines register_upper_entry_validators, which adds them and the
// finalfusion embedding validator to the checkpoint layer's registry.
// Internal to modelzip.
#pragma once

#include "modelzip/bytes.hpp"
#include "modelzip/limits.hpp"

namespace modelzip::graph {

// <tag>/graph.fb
void validate_graph_entry(const Bytes& contents, const Limits& limits);
// <tag>/trainingConfig.fb
void validate_training_config_entry(const Bytes& contents, const Limits& limits);

}  // namespace modelzip::graph
