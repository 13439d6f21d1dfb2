// Validators of the tag-level FlatBuffer entries written by the checkpoint
// layer, in the shape of checkpoint/entry_validators.hpp's EntryValidator
// (`void (*)(const Bytes&, const Limits&)`), so that Archive::verify and
// Writer::commit can check <tag>/graph.fb and <tag>/trainingConfig.fb.
// Each decodes the entry completely (verifier + every rule of the format)
// and throws modelzip::Error when it is invalid. Internal to modelzip.
#pragma once

#include "modelzip/bytes.hpp"
#include "modelzip/limits.hpp"

namespace modelzip::graph {

// <tag>/graph.fb
void validate_graph_entry(const Bytes& contents, const Limits& limits);
// <tag>/trainingConfig.fb
void validate_training_config_entry(const Bytes& contents, const Limits& limits);

}  // namespace modelzip::graph
