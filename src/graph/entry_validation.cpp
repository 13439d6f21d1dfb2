#include "graph/entry_validation.hpp"

#include "checkpoint/entry_validators.hpp"
#include "finalfusion/storage_shape.hpp"
#include "graph/rules.hpp"
#include "modelzip/finalfusion/embeddings.hpp"
#include "modelzip/graph/graph.hpp"
#include "modelzip/graph/training.hpp"

namespace modelzip::graph {

std::any validate_graph_entry(const Bytes& contents, const Limits& limits) {
  return decode_graph(contents, limits);
}

std::any validate_training_config_entry(const Bytes& contents, const Limits& limits) {
  return training::decode_training_config(contents, limits);
}

std::any check_graph_entry(const Bytes& contents, const Limits& limits,
                           const EntryProblemSink& report) {
  Graph g = detail::decode_graph_fields(contents, limits);
  bool broken = false;
  detail::check_graph(g, limits, detail::BrokenRules(ErrorCode::corrupt, [&](const Error& e) {
                        broken = true;
                        report(e);
                      }));
  return broken ? std::any() : std::any(std::move(g));
}

std::any check_training_config_entry(const Bytes& contents, const Limits& limits,
                                     const EntryProblemSink& report) {
  training::TrainingConfig c = training::decode_training_config_fields(contents, limits);
  bool broken = false;
  detail::check_training_config(c, detail::BrokenRules(ErrorCode::corrupt, [&](const Error& e) {
                                  broken = true;
                                  report(e);
                                }));
  return broken ? std::any() : std::any(std::move(c));
}

namespace {

std::any validate_embedding(const Bytes& contents, const Limits&) {
  (void)finalfusion::Embeddings::read(contents, "embedding");
  return {};
}

}  // namespace
}  // namespace modelzip::graph

namespace modelzip {

void register_upper_entry_validators(EntryValidators& registry) {
  registry.add(EntryKind::graph, &graph::validate_graph_entry);
  registry.add(EntryKind::training_config, &graph::validate_training_config_entry);
  registry.add(EntryKind::embedding, &graph::validate_embedding);
  registry.add_shape_reader(EntryKind::embedding, &finalfusion::detail::storage_shape);
  registry.add_checker(EntryKind::graph, &graph::check_graph_entry);
  registry.add_checker(EntryKind::training_config, &graph::check_training_config_entry);
  registry.set_tag_validator(&graph::validate_checkpoint_tag);
  registry.set_staged_tag_validator(&graph::validate_staged_tag);
}

}  // namespace modelzip
