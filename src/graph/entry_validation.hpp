// Validators of the tag-level FlatBuffer entries (<tag>/graph.fb,
// <tag>/trainingConfig.fb), in the shape of checkpoint/entry_validators.hpp's
// EntryValidator. Each decodes the entry completely (verifier + every rule
// of the format) and throws modelzip::Error when it is invalid. The tag
// validator checks the consistency rules of a graph checkpoint. This file
// also defines register_upper_entry_validators, which adds them and the
// finalfusion embedding validator to the checkpoint layer's registry.
// Internal to modelzip.
#pragma once

#include <any>
#include <string>

#include "checkpoint/entry_validators.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/bytes.hpp"
#include "modelzip/limits.hpp"

namespace modelzip::graph {

// <tag>/graph.fb; returns the Graph.
std::any validate_graph_entry(const Bytes& contents, const Limits& limits);
// <tag>/trainingConfig.fb; returns the training::TrainingConfig.
std::any validate_training_config_entry(const Bytes& contents, const Limits& limits);
// The same, for Archive::verify (EntryCheckers): a decoding problem is
// thrown, then each broken rule of schemas/GRAPH.md section 2 / 3 is passed
// to `report`. Return the Graph / training::TrainingConfig when no rule was
// broken, else an empty std::any.
std::any check_graph_entry(const Bytes& contents, const Limits& limits,
                           const EntryProblemSink& report);
std::any check_training_config_entry(const Bytes& contents, const Limits& limits,
                                     const EntryProblemSink& report);
// The consistency rules of schemas/GRAPH.md section 4 for `tag`, when it has
// graph.fb (a TagValidator; defined in checkpoint.cpp): each broken rule is
// reported under the entry it concerns (params.txt, updater.txt or
// trainingConfig.fb). Uses the Graph and TrainingConfig in `decoded`, else
// reads and decodes the entries; throws what reading graph.fb,
// trainingConfig.fb or a blob header throws.
void validate_checkpoint_tag(const Archive& archive, const std::string& tag,
                             const DecodedTagEntries& decoded, const ProblemSink& report);
// The same rules for a tag a commit is about to write (a StagedTagValidator;
// defined in checkpoint.cpp).
void validate_staged_tag(const StagedTag& tag, const Limits& limits);

}  // namespace modelzip::graph
