// The validity rules of graphs and training configs, parameterized by the
// error code to throw: invalid_argument for values built by the caller,
// corrupt for values decoded from untrusted bytes. Internal to modelzip.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "modelzip/bytes.hpp"
#include "modelzip/error.hpp"
#include "modelzip/graph/graph.hpp"
#include "modelzip/graph/training.hpp"
#include "modelzip/limits.hpp"

namespace modelzip::training {
// See graph::detail::decode_graph_fields.
TrainingConfig decode_training_config_fields(const Bytes& bytes, const Limits& limits);
}  // namespace modelzip::training

namespace modelzip::graph::detail {

// Where the rules send a broken rule: thrown as an Error (the first broken
// rule wins), or passed to a sink, after which the rules go on with every
// check that does not depend on the broken one (each problem is reported,
// once; the work stays linear in the size of what is checked).
class BrokenRules {
 public:
  // Throws Error(code).
  explicit BrokenRules(ErrorCode code) : code_(code) {}
  // Passes each Error(code) to `sink`, which may throw.
  BrokenRules(ErrorCode code, std::function<void(const Error&)> sink)
      : code_(code), sink_(std::move(sink)) {}
  // A broken rule; returns only when there is a sink.
  void operator()(std::string message) const { (*this)(code_, std::move(message)); }
  // A broken rule with another code than the rules' (limit_exceeded).
  void operator()(ErrorCode code, std::string message) const {
    Error e(code, std::move(message));
    if (!sink_) throw e;
    sink_(e);
  }

 private:
  ErrorCode code_;
  std::function<void(const Error&)> sink_;
};

// The rules listed in modelzip/graph/graph.hpp.
void check_graph(const Graph& graph, const Limits& limits, const BrokenRules& broken);
inline void check_graph(const Graph& graph, const Limits& limits, ErrorCode code) {
  check_graph(graph, limits, BrokenRules(code));
}

// The rules listed in modelzip/graph/training.hpp.
void check_training_config(const training::TrainingConfig& config, const BrokenRules& broken);
inline void check_training_config(const training::TrainingConfig& config, ErrorCode code) {
  check_training_config(config, BrokenRules(code));
}

// Decoding alone (schemas/GRAPH.md section 1, rules 1 to 8): throws what
// decode_graph / decode_training_config throw for the first problem met,
// and returns the fields without checking the rules of section 2 / 3
// (check_graph / check_training_config).
Graph decode_graph_fields(const Bytes& bytes, const Limits& limits);

// Config names that must exist in the graph: mappings name placeholders,
// loss variables name variables. Throws Error(code) for the first broken one.
void check_config_against_graph(const training::TrainingConfig& config, const Graph& graph,
                                ErrorCode code);
// The same rules, passing every broken one to `report` (mappings in field
// order, then loss variables), which may throw.
void check_config_against_graph(const training::TrainingConfig& config, const Graph& graph,
                                const std::function<void(std::string message)>& report);

}  // namespace modelzip::graph::detail
