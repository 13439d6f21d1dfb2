// The validity rules of graphs and training configs, parameterized by the
// error code to throw: invalid_argument for values built by the caller,
// corrupt for values decoded from untrusted bytes. Internal to modelzip.
#pragma once

#include <functional>
#include <string>

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
// loss variables name variables. Throws Error(code) for the first broken one.
void check_config_against_graph(const training::TrainingConfig& config, const Graph& graph,
                                ErrorCode code);
// The same rules, passing every broken one to `report` (mappings in field
// order, then loss variables), which may throw.
void check_config_against_graph(const training::TrainingConfig& config, const Graph& graph,
                                const std::function<void(std::string message)>& report);

}  // namespace modelzip::graph::detail
