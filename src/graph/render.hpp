// Text renderings of graphs, training configs and checkpoint tags, for the
// CLI commands `modelzip graph ARCHIVE [--tag T] [--json | --dot]` and
// `modelzip info ARCHIVE [--tag T] [--json]`. Internal to modelzip.
//
// Every function returns complete text ending in a newline and throws
// modelzip::Error only for problems of the archive (a missing tag, a corrupt
// graph.fb...), with the archive, entry and tag in the context.
// Thread safety: no shared state.
#pragma once

#include <string>
#include <string_view>

#include "modelzip/archive.hpp"
#include "modelzip/graph/graph.hpp"
#include "modelzip/graph/training.hpp"

namespace modelzip::graph {

// The graph as JSON:
//   {"variables": [{"name", "kind", "dtype", "shape": [..] or null}...],
//    "ops": [{"name", "type", "inputs", "outputs", "control_deps",
//             "i_args": {name: int}, "t_args": {name: number},
//             "b_args": {name: bool}, "d_args": {name: dtype name},
//             "s_args": {name: string}}...],
//    "outputs": [..], "loss_variables": [..]}
// Kinds and dtypes use variable_kind_name / dtype_name; unknown dimensions
// are -1; non-finite t_args are the strings "NaN", "Infinity", "-Infinity".
std::string graph_json(const Graph& graph);

// The graph as Graphviz DOT: one node per variable (ellipse; filled by kind:
// variable blue, constant grey, placeholder yellow; graph outputs doubled,
// loss variables red) and per op (box), an edge per input (variable -> op)
// and output (op -> variable), dashed edges for control dependencies.
// Node ids are "v:<name>" and "op:<name>". Labels show unknown dimensions
// as "?" ("[?, 2]") and an unknown rank as "?".
std::string graph_dot(const Graph& graph);

// The training config as JSON:
//   {"updater": {"type": "Adam", "learning_rate": .., ...},
//    "learning_rate_schedule": schedule or null,
//    "regularization": [{"type": "l2", "coefficient": schedule,
//                        "apply_learning_rate": bool}],
//    "minimize", "feature_mapping", "label_mapping", "feature_mask_mapping",
//    "label_mask_mapping", "loss_variables", "iteration_count",
//    "epoch_count", "properties": {key: value}}
// A schedule is {"schedule": "StepSchedule", "type": "iteration", <fields>};
// a RampSchedule has "base": schedule; a MapSchedule "steps": [{"start",
// "value"}].
std::string training_config_json(const training::TrainingConfig& config);

// Human-readable multi-line description of a training config; the config's
// strings (names, properties) escaped with detail::printable_name, so that
// each item stays on its line.
std::string training_config_text(const training::TrainingConfig& config);

// Summary of one tag (empty: newest) as JSON:
//   {"archive", "tag", "position" (1-based), "tags" (count), "newest",
//    "metadata": {"format_version", "writer", "model_name", ...},
//    "params": {"count", "shared", "compressed", "bytes", "own_bytes",
//               "dtypes": {dtype: count},
//               "quantized": {"<storage> <scheme>": count}},
//    "embeddings": {name: summary_json or {"error"}},
//    "file_metadata": {"safetensors": {key: value}} (the metadata kept from
//                     the imported files, <tag>/metadata.toml), {"error"}
//                     when that entry is malformed, or null (no entry),
//    "updater": {"count", "variables", "states": [names], "shared", "bytes",
//                "own_bytes"} or null (no updater.txt),
//    "graph": {"variables", "kinds": {kind: count}, "ops",
//              "op_types": {type: count}, "outputs", "loss_variables"}
//             or null (no graph.fb),
//    "training": training_config_json or null (no trainingConfig.fb)}
// An archive without tags has only its metadata: "tag", "position",
// "newest" and the sections after "metadata" are null.
// "bytes" counts the tensor bytes of every parameter, "own_bytes" only
// those stored in the tag's own folder (the rest are shared).
std::string tag_summary_json(const Archive& archive, std::string_view tag = {});

// The same summary as aligned human-readable text; the archive's strings
// (its path, tags, names, metadata values) escaped with
// detail::printable_name, as the CLI shows names.
std::string tag_summary_text(const Archive& archive, std::string_view tag = {});

}  // namespace modelzip::graph
