// Whole checkpoints: graph.fb + trainingConfig.fb + params + updater state.
#include "modelzip/graph/checkpoint.hpp"
#include "core/printable.hpp"

#include <algorithm>
#include <any>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>

#include "checkpoint/archive_state.hpp"
#include "checkpoint/entry_validators.hpp"
#include "core/shape_text.hpp"
#include "core/suggestions.hpp"
#include "graph/entry_validation.hpp"
#include "graph/flatbuffer_input.hpp"
#include "graph/rules.hpp"
#include "modelzip/error.hpp"

namespace modelzip {
namespace {

using graph::detail::fail;
using graph::detail::quote_name;
using modelzip::detail::shape_text;

std::string names_text(std::span<const std::string_view> names) {
  if (names.empty()) return "none";
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + std::string(names[i]);
  return s;
}

// The entry a broken rule concerns.
enum class RuleTable { training_config, params, updater };
using RuleSink = std::function<void(RuleTable table, std::string message)>;

std::string_view rule_entry(RuleTable table) {
  switch (table) {
    case RuleTable::training_config:
      return kTrainingConfigEntryName;
    case RuleTable::params:
      return "params.txt";
    case RuleTable::updater:
      break;
  }
  return "updater.txt";
}

// GRAPH.md section 4, rules 2 to 6, for a valid graph and config: passes each
// broken rule to `report`, which may throw (the first problem then wins) or
// return (every problem is reported). `params` and `states` have distinct
// keys.
void check_values(const graph::Graph& graph, const training::TrainingConfig* training,
                  std::span<const StoredValue> params, std::span<const StoredValue> states,
                  const RuleSink& report) {
  std::unordered_map<std::string_view, const graph::Variable*> vars;
  for (const auto& v : graph.variables) vars.emplace(v.name, &v);
  std::unordered_map<std::string_view, const StoredValue*> by_name;
  for (const auto& p : params) {
    by_name.emplace(p.name, &p);
    if (!p.tensor)
      report(RuleTable::params, "parameter " + quote_name(p.name) +
                                    " is an embedding; the parameters of a graph checkpoint "
                                    "are tensors");
  }

  for (const auto& v : graph.variables) {
    if (!v.has_value()) continue;
    const std::string what = std::string(graph::variable_kind_name(v.kind)) + " " +
                             quote_name(v.name) + " (" + std::string(dtype_name(v.dtype)) + " " +
                             shape_text(*v.shape) + ")";
    auto it = by_name.find(v.name);
    if (it == by_name.end()) {
      report(RuleTable::params, what + " has no parameter");
      continue;
    }
    const StoredValue& p = *it->second;
    if (!p.tensor) continue;
    if (p.dtype != v.dtype)
      report(RuleTable::params, "parameter " + quote_name(v.name) + " is " +
                                    std::string(dtype_name(p.dtype)) + ", but " + what + " is not");
    if (*p.shape != *v.shape)
      report(RuleTable::params, "parameter " + quote_name(v.name) + " has shape " +
                                    shape_text(*p.shape) + ", but " + what + " does not");
  }
  for (const auto& p : params) {
    auto it = vars.find(p.name);
    if (it == vars.end())
      report(RuleTable::params,
             "parameter " + quote_name(p.name) + " is not a variable of the graph");
    else if (!it->second->has_value())
      report(RuleTable::params, "parameter " + quote_name(p.name) + " names a " +
                                    std::string(graph::variable_kind_name(it->second->kind)) +
                                    ", which has no stored value");
  }

  if (states.empty()) return;
  if (!training) {
    report(RuleTable::updater,
           "the checkpoint has updater state but no training config (which names the updater)");
    return;
  }
  const auto state_names = training::updater_state_names(training->updater);
  const std::string updater_text = "updater " +
                                   std::string(training::updater_name(training->updater)) +
                                   " (state: " + names_text(state_names) + ")";
  std::unordered_set<std::string_view> refused;  // variables reported as such, once
  std::unordered_map<std::string_view, std::unordered_set<std::string_view>> present;
  for (const auto& s : states) {
    present[s.name].insert(s.state);
    auto it = vars.find(s.name);
    if (it == vars.end()) {
      if (refused.insert(s.name).second)
        report(RuleTable::updater, "updater state for " + quote_name(s.name) +
                                       ", which is not a variable of the graph");
      continue;
    }
    const graph::Variable& v = *it->second;
    if (!v.is_trainable()) {
      if (refused.insert(s.name).second)
        report(RuleTable::updater,
               "updater state for " + quote_name(s.name) + ", a " +
                   std::string(graph::variable_kind_name(v.kind)) + " of type " +
                   std::string(dtype_name(v.dtype)) +
                   " (only trainable variables: floating-point or complex VARIABLEs have "
                   "updater state)");
      continue;
    }
    const std::string what = "updater state " + quote_name(s.state) + " of " + quote_name(s.name);
    if (std::find(state_names.begin(), state_names.end(), s.state) == state_names.end()) {
      report(RuleTable::updater, what + " is not a state of " + updater_text);
      continue;
    }
    if (!s.tensor) {
      report(RuleTable::updater, what + " is an embedding, not a tensor");
      continue;
    }
    if (!dtype_is_floating(s.dtype) && !dtype_is_complex(s.dtype))
      report(RuleTable::updater, what + " is " + std::string(dtype_name(s.dtype)) +
                                     ", not a floating-point or complex type");
    if (*s.shape != *v.shape)
      report(RuleTable::updater, what + " has shape " + shape_text(*s.shape) + ", the variable " +
                                     shape_text(*v.shape));
  }
  for (const auto& v : graph.variables) {
    if (!v.is_trainable()) continue;
    auto it = present.find(v.name);
    std::string missing;
    for (std::string_view state : state_names)
      if (it == present.end() || !it->second.count(state))
        missing += (missing.empty() ? "" : ", ") + quote_name(state);
    if (!missing.empty())
      report(RuleTable::updater, "trainable variable " + quote_name(v.name) +
                                     " has no updater state " + missing + " (" + updater_text +
                                     " keeps every state for every trainable variable once any "
                                     "is saved)");
  }
}

// GRAPH.md section 4, rules 1 (the config's names against the graph) to 6,
// for a valid graph and config, passing each broken rule to `report` (see
// check_values).
void check_tag_rules(const graph::Graph& graph, const training::TrainingConfig* training,
                     std::span<const StoredValue> params, std::span<const StoredValue> states,
                     const RuleSink& report) {
  if (training)
    graph::detail::check_config_against_graph(*training, graph, [&](std::string message) {
      report(RuleTable::training_config, std::move(message));
    });
  check_values(graph, training, params, states, report);
}

StoredValue stored(std::string_view name, std::string_view state, const Tensor& t) {
  return StoredValue{name, state, t.dtype(), &t.shape(), true};
}

StoredValue stored(const ParamInfo& p) {
  return StoredValue{p.name, p.state, p.dtype, &p.shape, p.kind == BlobKind::tensor};
}

void check_consistency(const Checkpoint& c, const Limits& limits, ErrorCode code) {
  graph::detail::check_graph(c.graph, limits, code);
  if (c.training) {
    graph::detail::check_training_config(*c.training, code);
    graph::detail::check_config_against_graph(*c.training, c.graph, code);
  }
  std::vector<StoredValue> params, states;
  for (const auto& [name, tensor] : c.params) params.push_back(stored(name, {}, tensor));
  for (const auto& [name, by_state] : c.updater_state)
    for (const auto& [state, tensor] : by_state) states.push_back(stored(name, state, tensor));
  check_values(c.graph, c.training ? &*c.training : nullptr, params, states,
               [code](RuleTable, std::string message) { fail(code, std::move(message)); });
}

std::string resolve_tag(const Archive& archive, std::string_view tag) {
  if (tag.empty()) return archive.newest_tag();
  auto found = archive.find_tag(tag);
  if (!found)
    throw Error(ErrorCode::not_found,
                "no such tag" + modelzip::detail::did_you_mean(tag, archive.tags()),
                ErrorContext{.archive = archive.name(), .tag = std::string(tag)});
  return *found;
}

template <class F>
auto with_entry_context(const Archive& archive, const std::string& entry, const std::string& tag,
                        F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    throw e.with_context(ErrorContext{.archive = archive.name(), .entry = entry, .tag = tag});
  }
}

}  // namespace

void check_checkpoint(const Checkpoint& checkpoint, const Limits& limits) {
  check_consistency(checkpoint, limits, ErrorCode::invalid_argument);
}

NewTag checkpoint_tag(const Checkpoint& c, const CheckpointSaveOptions& options) {
  check_consistency(c, Limits{}, ErrorCode::invalid_argument);
  std::unordered_set<std::string_view> unchanged(options.unchanged_params.begin(),
                                                 options.unchanged_params.end());
  if (!unchanged.empty() && options.share_from_tag.empty())
    throw Error(ErrorCode::invalid_argument,
                "unchanged parameters are listed but share_from_tag is empty");
  for (std::string_view name : unchanged)
    if (!c.params.count(std::string(name)))
      throw Error(ErrorCode::invalid_argument, "unchanged parameter " + quote_name(name) +
                                                   " is not a parameter of the checkpoint");

  NewTag tag;
  tag.set_entry(std::string(kGraphEntryName), graph::encode_graph(c.graph),
                options.metadata_compression);
  if (c.training)
    tag.set_entry(std::string(kTrainingConfigEntryName),
                  training::encode_training_config(*c.training), options.metadata_compression);
  // Graph order: params.txt lists parameters as the graph lists variables.
  for (const auto& v : c.graph.variables) {
    if (!v.has_value()) continue;
    if (unchanged.count(v.name))
      tag.share(v.name, options.share_from_tag, v.name);
    else
      tag.add(v.name, c.params.at(v.name), options.param_options);
  }
  if (c.training) {
    const auto names = training::updater_state_names(c.training->updater);
    for (const auto& v : c.graph.variables) {
      auto it = c.updater_state.find(v.name);
      if (it == c.updater_state.end()) continue;
      for (std::string_view state : names)
        tag.add_updater_state(v.name, std::string(state), it->second.at(std::string(state)),
                              options.param_options);
    }
  }
  return tag;
}

graph::Graph load_graph(const Archive& archive, std::string_view tag) {
  const std::string t = resolve_tag(archive, tag);
  const std::string entry = t + "/" + std::string(kGraphEntryName);
  if (!archive.has_entry(entry))
    throw Error(ErrorCode::not_found, "no such entry: the tag is not a graph checkpoint",
                ErrorContext{.archive = archive.name(), .entry = entry, .tag = t});
  return with_entry_context(archive, entry, t, [&] {
    return graph::decode_graph(archive.entry(entry), checkpoint::ArchiveState(archive).limits());
  });
}

std::optional<training::TrainingConfig> load_training_config(const Archive& archive,
                                                             std::string_view tag) {
  const std::string t = resolve_tag(archive, tag);
  const std::string entry = t + "/" + std::string(kTrainingConfigEntryName);
  if (!archive.has_entry(entry)) return std::nullopt;
  return with_entry_context(archive, entry, t, [&] {
    return training::decode_training_config(archive.entry(entry),
                                            checkpoint::ArchiveState(archive).limits());
  });
}

Checkpoint load_checkpoint(const Archive& archive, std::string_view tag, ReadMode mode) {
  const std::string t = resolve_tag(archive, tag);
  Checkpoint c;
  c.graph = load_graph(archive, t);
  c.training = load_training_config(archive, t);
  const std::string params_entry = t + "/params.txt";
  for (const ParamInfo& p : archive.params(t)) {
    if (p.kind != BlobKind::tensor)
      throw Error(ErrorCode::corrupt,
                  "parameter " + quote_name(p.name) +
                      " is an embedding; the parameters of a graph checkpoint are tensors",
                  ErrorContext{.archive = archive.name(), .entry = params_entry, .tag = t});
    c.params.emplace(p.name, archive.tensor(p.name, t, mode));
  }
  for (const ParamInfo& s : archive.updater_states(t))
    c.updater_state[s.name][s.state] = archive.updater_state(s.name, s.state, t, mode);
  try {
    check_consistency(c, checkpoint::ArchiveState(archive).limits(), ErrorCode::corrupt);
  } catch (const Error& e) {
    throw e.with_context(ErrorContext{.archive = archive.name(), .tag = t});
  }
  return c;
}

namespace graph {

void validate_checkpoint_tag(const Archive& archive, const std::string& tag,
                             const DecodedTagEntries& decoded, const ProblemSink& report) {
  if (!archive.has_entry(tag + "/" + std::string(kGraphEntryName))) return;
  std::optional<Graph> loaded_graph;
  const Graph* g = std::any_cast<Graph>(&decoded.graph);
  if (!g) g = &loaded_graph.emplace(load_graph(archive, tag));
  std::optional<training::TrainingConfig> loaded_training;
  const training::TrainingConfig* training =
      std::any_cast<training::TrainingConfig>(&decoded.training_config);
  if (!training) {
    loaded_training = load_training_config(archive, tag);
    if (loaded_training) training = &*loaded_training;
  }
  const std::vector<ParamInfo> param_infos = archive.params(tag);
  const std::vector<ParamInfo> state_infos = archive.updater_states(tag);
  std::vector<StoredValue> params, states;
  for (const ParamInfo& p : param_infos) params.push_back(stored(p));
  for (const ParamInfo& s : state_infos) states.push_back(stored(s));
  check_tag_rules(*g, training, params, states, [&](RuleTable table, const std::string& message) {
    report(tag + "/" + std::string(rule_entry(table)), message);
  });
}

void validate_staged_tag(const StagedTag& staged, const Limits& limits) {
  const std::string tag(staged.tag);
  auto decoding = [&](std::string_view entry, auto&& decode) {
    try {
      return decode();
    } catch (const Error& e) {
      throw e.with_context(ErrorContext{.entry = tag + "/" + std::string(entry), .tag = tag});
    }
  };
  std::optional<Graph> decoded_graph;
  const Graph* g = std::any_cast<Graph>(&staged.decoded_graph);
  if (!g)
    g = &decoded_graph.emplace(
        decoding(kGraphEntryName, [&] { return decode_graph(*staged.graph, limits); }));
  std::optional<training::TrainingConfig> decoded_training;
  const training::TrainingConfig* training = nullptr;
  if (staged.training_config) {
    training = std::any_cast<training::TrainingConfig>(&staged.decoded_training_config);
    if (!training)
      training = &decoded_training.emplace(decoding(kTrainingConfigEntryName, [&] {
        return training::decode_training_config(*staged.training_config, limits);
      }));
  }
  check_tag_rules(
      *g, training, staged.params, staged.states, [&](RuleTable table, std::string message) {
        throw Error(ErrorCode::invalid_argument,
                    std::move(message) +
                        " (the tag has graph.fb: its entries must form a "
                        "consistent graph checkpoint, schemas/GRAPH.md section 4)",
                    ErrorContext{.entry = tag + "/" + std::string(rule_entry(table)), .tag = tag});
      });
}

}  // namespace graph
}  // namespace modelzip
