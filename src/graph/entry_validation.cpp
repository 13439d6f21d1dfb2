#include "graph/entry_validation.hpp"

#include "modelzip/graph/graph.hpp"
#include "modelzip/graph/training.hpp"

namespace modelzip::graph {

void validate_graph_entry(const Bytes& contents, const Limits& limits) {
  (void)decode_graph(contents, limits);
}

void validate_training_config_entry(const Bytes& contents, const Limits& limits) {
  (void)training::decode_training_config(contents, limits);
}

}  // namespace modelzip::graph
