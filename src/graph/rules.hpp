// The validity rules of graphs and training configs, parameterized by the
// error code to throw: invalid_argument for values built by the caller,
// corrupt for values decoded from untrusted bytes. Internal to modelzip.
#pragma once

#include "modelzip/error.hpp"
#include "modelzip/graph/graph.hpp"
#include "modelzip/graph/training.hpp"
#include "modelzip/limits.hpp"

namespace modelzip::graph::detail {

// The rules listed in modelzip/graph/graph.hpp.
void check_graph(const Graph& graph, const Limits& limits, ErrorCode code);

// The rules listed in modelzip/graph/training.hpp.
void check_training_config(const training::TrainingConfig& config, ErrorCode code);

// Config names that must exist in the graph: mappings name placeholders,
// loss variables name variables.
void check_config_against_graph(const training::TrainingConfig& config, const Graph& graph,
                                ErrorCode code);

}  // namespace modelzip::graph::detail
